import { Subjects } from '@oc/contracts';
import type { ServiceClient } from '@oc/messaging';
import type { GatewayNotifier } from '../application/billing';

export const broadcastNotifier = (client: ServiceClient): GatewayNotifier => ({
  keyChanged: (keyHash) => client.broadcast(Subjects.broadcast.apiKeyRevoked, { key_hash: keyHash }),
  organizationChanged: (orgId) => client.broadcast(Subjects.broadcast.organizationChanged, { org_id: orgId }),
});
