import { ActivityListSchema, ActivityQuery, ActivitySubjects, parseOrThrow } from '@oc/contracts';
import type { Route } from './routes';

/**
 * `GET /admin/v1/organizations/{org_id}/activity`: one organization's paid requests, newest first. The console's
 * `/console/v1/activity` is this route with the member's own organization, never a parameter.
 */
export const adminActivityRoute: Route<'admin'> = {
  method: 'GET',
  path: '/admin/v1/organizations/:org_id/activity',
  scope: null,
  doc: {
    summary: "The organization's paid requests, newest first: each one's key, model, status (held, charged, released, expired), amounts and usage",
    query: ActivityQuery,
    response: ActivityListSchema,
    // An org_id that names no organization, or an `after` that names no row.
    errors: [404],
  },
  handle: ({ services, params, query, headers }) =>
    services.request(ActivitySubjects.listActivity, { ...parseOrThrow(ActivityQuery, query), org_id: params.org_id }, { headers }),
};
