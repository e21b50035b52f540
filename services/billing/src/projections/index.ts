import type { ProjectionSet } from '@oc/readmodel';
import { activityCollections, activityProjection } from './activity';
import { autoRechargeCollections, autoRechargeProjection } from './auto-recharge-projection';
import { alertCollections, alertSettingsProjection } from './alerts-projection';
import { billingProjections } from './billing-projections';
import { billingCollections } from './documents';
import { organizationNameCollections, organizationNamesProjection } from './organization-names';
import { paymentCollections, paymentsProjection } from './payments-projection';
import { usageCollections, usageProjection } from './usage';

/** The billing service's read models and the projections that write them (loaded by a projection thread too). */
export const billingReadModels: ProjectionSet = {
  projections: [...billingProjections, usageProjection, paymentsProjection, alertSettingsProjection, activityProjection, organizationNamesProjection, autoRechargeProjection],
  collections: [...billingCollections, ...usageCollections, ...paymentCollections, ...alertCollections, ...activityCollections, ...organizationNameCollections, ...autoRechargeCollections],
};
