import { type KeyPrincipal, modelNotAllowed } from '@oc/contracts';

/**
 * A key limited to some models (`allowed_models`) is refused any other before its request goes further: nothing
 * is held or asked upstream. A body that names no model as a string is left to the route's own validation.
 */
export function refuseModelNotAllowed(principal: unknown, body: unknown) {
  const allowed = (principal as Partial<KeyPrincipal>).allowed_models;
  if (!allowed) return;
  const model = (body as { model?: unknown }).model;
  if (typeof model === 'string' && !allowed.includes(model)) throw modelNotAllowed(model, allowed);
}
