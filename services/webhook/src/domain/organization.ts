import { DomainError, type WebhookDomainEvent, WebhookStreams, streamName } from '@oc/contracts';

/**
 * An organization's webhooks as counted against its limit (stream `webhookorg-<org>`). A create takes its
 * place here first, appended with the revision it read, so two creates racing on two replicas cannot both
 * take the last place; a delete gives it back.
 */
export type OrganizationWebhooksEvent = Extract<WebhookDomainEvent, { type: 'OrganizationWebhookAdded' | 'OrganizationWebhookRemoved' }>;

export type OrganizationWebhooksCommand =
  | {
      type: 'AddWebhook';
      orgId: string;
      webhookId: string;
      max: number;
      now: number;
      /**
       * The organization's webhooks from before this stream existed (from the read model), counted on its
       * first use; ignored once the stream has events.
       */
      existing: readonly string[];
    }
  | { type: 'RemoveWebhook'; orgId: string; webhookId: string };

export interface OrganizationWebhooks {
  /** Never written yet: webhooks from before the count may exist. */
  counted: boolean;
  /** Webhook id → when it took its place (ms). */
  webhooks: ReadonlyMap<string, number>;
}

export const organizationWebhooksStream = (orgId: string) => streamName(WebhookStreams.organization, orgId);

export const webhookLimitReached = (max: number) =>
  new DomainError({ kind: 'InvalidState', code: 'webhook_limit_reached', message: `An organization can have at most ${max} webhooks; delete one first.` });

function decide(command: OrganizationWebhooksCommand, state: OrganizationWebhooks): OrganizationWebhooksEvent[] {
  const ref = (webhookId: string) => ({ webhook_id: webhookId, org_id: command.orgId });
  switch (command.type) {
    case 'AddWebhook': {
      if (state.webhooks.has(command.webhookId)) return [];
      const earlier = state.counted ? [] : command.existing.filter((id) => id !== command.webhookId);
      if (state.webhooks.size + earlier.length >= command.max) throw webhookLimitReached(command.max);
      return [...earlier, command.webhookId].map((id) => ({ type: 'OrganizationWebhookAdded', data: { ...ref(id), at: command.now } }));
    }
    case 'RemoveWebhook':
      return state.webhooks.has(command.webhookId) ? [{ type: 'OrganizationWebhookRemoved', data: ref(command.webhookId) }] : [];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: OrganizationWebhooks, event: OrganizationWebhooksEvent): OrganizationWebhooks {
  const webhooks = new Map(state.webhooks);
  if (event.type === 'OrganizationWebhookAdded') webhooks.set(event.data.webhook_id, event.data.at);
  else webhooks.delete(event.data.webhook_id);
  return { counted: true, webhooks };
}

export const organizationWebhooksDecider = {
  decide,
  evolve,
  initialState: (): OrganizationWebhooks => ({ counted: false, webhooks: new Map() }),
};
