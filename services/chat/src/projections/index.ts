import type { ProjectionSet } from '@oc/readmodel';
import { chatProjections } from './chat-projections';
import { chatCollections } from './documents';

/** The chat service's read models and the projections that write them (loaded by a projection thread too). */
export const chatReadModels: ProjectionSet = { projections: chatProjections, collections: chatCollections };
