import { answer, Subjects, VideoMessages } from '@oc/contracts';
import { Controller, Inject } from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { z } from 'zod';
import type { Logger } from 'pino';
import { VideoService } from '../application/videos';

export const VIDEO_SERVICE = Symbol('VideoService');
export const LOGGER = Symbol('Logger');

/** Binds the video subjects to the application service; every answer is a Reply value. */
@Controller()
export class VideoController {
  constructor(
    @Inject(VIDEO_SERVICE) private readonly videos: VideoService,
    @Inject(LOGGER) private readonly logger: Logger,
  ) {}

  private readonly unexpected = (err: unknown) => this.logger.error({ err }, 'video request failed');

  @MessagePattern(Subjects.video.create)
  create(@Payload() p: unknown) {
    return answer(VideoMessages.create, p, async (m) => this.videos.withPollAfter(await this.videos.create(m), m.mode), this.unexpected);
  }

  @MessagePattern(Subjects.video.remix)
  remix(@Payload() p: unknown) {
    return answer(VideoMessages.remix, p, async (m) => this.videos.withPollAfter(await this.videos.remix(m), m.mode), this.unexpected);
  }

  @MessagePattern(Subjects.video.get)
  get(@Payload() p: unknown) {
    return answer(VideoMessages.get, p, (m) => this.videos.read(m), this.unexpected);
  }

  @MessagePattern(Subjects.video.list)
  list(@Payload() p: unknown) {
    return answer(VideoMessages.list, p, (m) => this.videos.list(m), this.unexpected);
  }

  @MessagePattern(Subjects.video.delete)
  delete(@Payload() p: unknown) {
    return answer(VideoMessages.delete, p, (m) => this.videos.delete(m), this.unexpected);
  }

  @MessagePattern(Subjects.video.describeContent)
  describeContent(@Payload() p: unknown) {
    return answer(VideoMessages.describeContent, p, (m) => this.videos.describeContent(m), this.unexpected);
  }

  @MessagePattern(Subjects.video.readContent)
  readContent(@Payload() p: unknown) {
    return answer(VideoMessages.readContent, p, (m) => this.videos.readContent(m), this.unexpected);
  }

  @MessagePattern(Subjects.video.deployments)
  deployments(@Payload() p: unknown) {
    return answer(z.unknown(), p, async () => ({ object: 'list' as const, data: this.videos.deployments() }), this.unexpected);
  }

  @MessagePattern(Subjects.video.prices)
  prices(@Payload() p: unknown) {
    return answer(VideoMessages.prices, p, async () => this.videos.prices(), this.unexpected);
  }

  @MessagePattern(Subjects.video.ping)
  ping(@Payload() p: unknown) {
    return answer(z.unknown(), p, () => this.videos.ping(), this.unexpected);
  }
}
