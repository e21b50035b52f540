export * from './provider-error';
