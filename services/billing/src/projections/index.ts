import type { ProjectionSet } from '@oc/readmodel';
import { billingProjections } from './billing-projections';
import { billingCollections } from './documents';
import { paymentCollections, paymentsProjection } from './payments-projection';
import { usageCollections, usageProjection } from './usage';

/** The billing service's read models and the projections that write them (loaded by a projection thread too). */
export const billingReadModels: ProjectionSet = {
  projections: [...billingProjections, usageProjection, paymentsProjection],
  collections: [...billingCollections, ...usageCollections, ...paymentCollections],
};
