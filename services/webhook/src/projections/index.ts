import type { ProjectionSet } from '@oc/readmodel';
import { webhookProjections } from './webhook-projections';
import { webhookCollections } from './documents';

/** The webhook service's read models and the projections that write them (loaded by a projection thread too). */
export const webhookReadModels: ProjectionSet = { projections: webhookProjections, collections: webhookCollections };
