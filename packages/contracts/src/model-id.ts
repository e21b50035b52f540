import { z } from 'zod';

/**
 * A public model id: what customers send as `model` (the spec's, or one of an operator's catalog). A module of its
 * own so that the bodies (chat, video) and the catalog, which names the video lengths and sizes, import no cycle.
 */
export const PublicModelIdSchema = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'lower-case letters, digits, ".", "_" and "-", at most 64');
