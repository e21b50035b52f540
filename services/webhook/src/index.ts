export * from './app';
export * from './application/webhooks';
export * from './application/deliveries';
export * from './application/scheduler';
export { resolveSecretKey, SecretBox } from './adapters/secret-box';
export * from './config';
export { HttpWebhookSender, type WebhookSender, type WebhookRequest } from './adapters/http-sender';
