import { serviceProcessConfig } from '@oc/service-runtime/config';
import { ChatConfigSchema } from './config';

/** The chat process's environment, as main.ts parses it at boot (and the deployment files are checked against). */
export const chatProcessConfig = serviceProcessConfig('chat').extend(ChatConfigSchema.shape);
