import { z } from 'zod';
import { ApiError } from './errors';
import { KeyBudgetBody, KeyBudgetMicrosSchema } from './key-budget';
import { PublicModelIdSchema } from './model-id';

/**
 * The models an API key may use (`model` of a chat, text completion, response or video), or null for every model
 * the service serves. A request for any other is refused with 403 before anything is held or asked upstream.
 */
export const AllowedModelsSchema = z
  .array(PublicModelIdSchema)
  .min(1, 'name at least one model, or null for every model')
  .max(100)
  .transform((models) => [...new Set(models)])
  .nullable();

const KeyChanges = {
  name: z.string().trim().min(1).max(200).optional(),
  allowed_models: AllowedModelsSchema.optional(),
};

/**
 * PATCH of an API key: what may change after it is made. Its secret, mode and scopes never change. `budget` in USD
 * (micro-dollars once parsed): a period stated is set, or removed with null; a period absent is left as it is.
 */
export const UpdateApiKeyBody = z
  .strictObject({ ...KeyChanges, budget: KeyBudgetBody.optional() })
  .refine((b) => b.name !== undefined || b.allowed_models !== undefined || b.budget !== undefined, {
    message: 'name, allowed_models or budget is required',
  });

/** The PATCH as billing is asked it, for one organization's key. */
export const UpdateApiKeyMessage = z.object({
  org_id: z.string().min(1),
  key_id: z.string().min(1),
  ...KeyChanges,
  budget: KeyBudgetMicrosSchema.optional(),
});

export const modelNotAllowed = (model: string, allowed: readonly string[]) =>
  new ApiError({
    status: 403,
    type: 'permission_error',
    code: 'model_not_allowed',
    message: `This API key may not use the model '${model}'; it may use: ${allowed.join(', ')}.`,
    param: 'model',
  });
