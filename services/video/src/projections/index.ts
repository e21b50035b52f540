import type { ProjectionSet } from '@oc/readmodel';
import { videoProjections } from './video-projections';
import { videoCollections } from './documents';

/** The video service's read models and the projections that write them (loaded by a projection thread too). */
export const videoReadModels: ProjectionSet = { projections: videoProjections, collections: videoCollections };
