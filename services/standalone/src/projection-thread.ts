import { billingReadModels } from '@oc/billing/projections';
import { chatReadModels } from '@oc/chat/projections';
import { serveProjections } from '@oc/readmodel';
import { videoReadModels } from '@oc/video/projections';
import { webhookReadModels } from '@oc/webhook/projections';

/** The standalone process's projection thread: every service's read models, by the names standalone.ts uses. */
serveProjections({ billing: billingReadModels, chat: chatReadModels, video: videoReadModels, webhook: webhookReadModels });
