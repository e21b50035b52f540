import { serviceProcessConfig } from '@oc/service-runtime/config';
import { StripeConfigSchema } from './config';

/** The billing process's environment, as main.ts parses it at boot (and the deployment files are checked against). */
export const billingProcessConfig = serviceProcessConfig('billing').extend(StripeConfigSchema.shape);
