import { NatsPrefixSchema, NatsStreamReplicasSchema, NatsUrlSchema, type OwningService, ShutdownConfigSchema } from '@oc/contracts';
import { TelemetryConfigSchema } from '@oc/telemetry';
import { z } from 'zod';

export const LogLevelSchema = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info');

/** The settings every service process shares; each service extends them with its own. */
export const serviceProcessConfig = (service: OwningService) =>
  z.object({
    NATS_URL: NatsUrlSchema,
    NATS_PREFIX: NatsPrefixSchema,
    NATS_STREAM_REPLICAS: NatsStreamReplicasSchema,
    DATA_DIR: z.string().default(`./.data/${service}`),
    EVENTSTORE_URL: z.string().optional(),
    /**
     * The SQLite event store when EVENTSTORE_URL is unset; `$DATA_DIR/events.sqlite` by default. Processes on
     * one machine may share one file, as services share one EventStoreDB in production.
     */
    EVENTSTORE_FILE: z.string().min(1).optional(),
    MONGO_URL: z.string().optional(),
    /**
     * The SQLite read models when MONGO_URL is unset; `$DATA_DIR/read-models.sqlite` by default. The replicas of
     * a service share it: the one holding the lease `projector.<service>` writes it, every replica reads it.
     */
    READMODEL_FILE: z.string().min(1).optional(),
    /** This replica's name among the service's running replicas; the host name by default. */
    REPLICA_ID: z.string().min(1).max(200).optional().describe('a name no other running replica of the service uses'),
    LOG_LEVEL: LogLevelSchema,
    /** Where the process answers /healthz and /readyz (containers set it); unset, it opens no port. */
    HEALTH_PORT: z.coerce.number().int().min(1).max(65_535).optional().describe('a TCP port, 1 to 65535'),
    HEALTH_HOST: z.string().default('0.0.0.0'),
    ...ShutdownConfigSchema.shape,
    ...TelemetryConfigSchema.shape,
  });
export type ServiceProcessConfig = z.infer<ReturnType<typeof serviceProcessConfig>>;
