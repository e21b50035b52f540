import { z } from 'zod';
import { formatUsd } from './money';

/** The spec's error body: `{error:{type,message,param?,code}}`. */
export const ApiErrorBodySchema = z.object({
  error: z.object({
    type: z.string(),
    message: z.string(),
    param: z.string().optional(),
    code: z.string(),
  }),
});
export type ApiErrorBody = z.infer<typeof ApiErrorBodySchema>;

export const ApiErrorSchema = z.object({
  status: z.number().int(),
  type: z.string(),
  code: z.string(),
  message: z.string(),
  param: z.string().optional(),
  /** Seconds a client should wait before retrying (429, 503). */
  retryAfter: z.number().int().optional(),
  /**
   * The amounts a 402 compared, in micro-USD, so that the product that asked for the funds can explain the
   * refusal in its own terms (chat: what `max_tokens` reserved). Never part of the body a client sees.
   */
  funds: z.object({ requiredMicros: z.int(), availableMicros: z.int() }).optional(),
});
export type ApiErrorData = z.infer<typeof ApiErrorSchema>;

/**
 * An error that crosses the wire as data. Every service answers a failed request with one of these,
 * and the gateway turns it into the HTTP status and body the spec gives.
 */
export class ApiError extends Error {
  readonly status: number;
  readonly type: string;
  readonly code: string;
  readonly param?: string;
  readonly retryAfter?: number;
  readonly funds?: { requiredMicros: number; availableMicros: number };

  constructor(data: ApiErrorData) {
    super(data.message);
    this.name = 'ApiError';
    this.status = data.status;
    this.type = data.type;
    this.code = data.code;
    if (data.param !== undefined) this.param = data.param;
    if (data.retryAfter !== undefined) this.retryAfter = data.retryAfter;
    if (data.funds !== undefined) this.funds = data.funds;
  }

  toData(): ApiErrorData {
    return {
      status: this.status,
      type: this.type,
      code: this.code,
      message: this.message,
      ...(this.param !== undefined ? { param: this.param } : {}),
      ...(this.retryAfter !== undefined ? { retryAfter: this.retryAfter } : {}),
      ...(this.funds !== undefined ? { funds: this.funds } : {}),
    };
  }

  toBody(): ApiErrorBody {
    return {
      error: {
        type: this.type,
        message: this.message,
        ...(this.param !== undefined ? { param: this.param } : {}),
        code: this.code,
      },
    };
  }
}

export const invalidRequest = (code: string, message: string, param?: string) =>
  new ApiError({ status: 400, type: 'invalid_request_error', code, message, ...(param ? { param } : {}) });

export const invalidApiKey = (message = 'Invalid API key provided.') =>
  new ApiError({ status: 401, type: 'authentication_error', code: 'invalid_api_key', message });

export const insufficientScope = (scope: string) =>
  new ApiError({
    status: 403,
    type: 'permission_error',
    code: 'insufficient_scope',
    message: `This API key lacks the required scope: ${scope}.`,
  });

export const notFound = (code: string, message: string, param?: string) =>
  new ApiError({ status: 404, type: 'invalid_request_error', code, message, ...(param ? { param } : {}) });

export const conflict = (code: string, message: string, param?: string) =>
  new ApiError({ status: 409, type: 'invalid_request_error', code, message, ...(param ? { param } : {}) });

/** 402: the available balance cannot cover what the request must reserve; the message states both amounts. */
export const insufficientFunds = (
  requiredMicros: number,
  availableMicros: number,
  message = `Insufficient balance: this request requires ${formatUsd(requiredMicros)} but ${formatUsd(availableMicros)} is available.`,
) =>
  new ApiError({
    status: 402,
    type: 'insufficient_quota',
    code: 'insufficient_quota',
    message,
    funds: { requiredMicros, availableMicros },
  });

export const rateLimited = (retryAfterSeconds: number, what: string) =>
  new ApiError({
    status: 429,
    type: 'rate_limit_error',
    code: 'rate_limit_exceeded',
    message: `Rate limit exceeded (${what}). Please retry in ${retryAfterSeconds} seconds.`,
    retryAfter: retryAfterSeconds,
  });

export const internalError = () =>
  new ApiError({
    status: 500,
    type: 'api_error',
    code: 'internal_error',
    message: 'The server had an error while processing your request. Please retry.',
  });

export const serviceUnavailable = (message = 'The service is temporarily unavailable. Please retry.') =>
  new ApiError({ status: 503, type: 'service_unavailable_error', code: 'service_unavailable', message, retryAfter: 1 });
