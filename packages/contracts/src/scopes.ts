import { z } from 'zod';

export const SCOPES = [
  'video:read',
  'video:write',
  'video:delete',
  'chat:read',
  'chat:write',
  'text:write',
  'webhook:read',
  'webhook:write',
  'webhook:delete',
] as const;

export const ScopeSchema = z.enum(SCOPES);
export type Scope = z.infer<typeof ScopeSchema>;
