import type { Page } from 'playwright-core';
import { expectConformance } from './conformance';

/**
 * What the console suites watch on a page: every error the page logs or throws (into `consoleErrors`), and every
 * answer of the console's API, checked against the OpenAPI document (into `answers`: the mismatch, or undefined).
 */
export function watchConsole(page: Page, origin: string, consoleErrors: string[], answers: Promise<string | undefined>[]) {
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(`${message.text()} ${message.location().url}`);
  });
  page.on('pageerror', (error) => consoleErrors.push(error.message));
  page.on('response', (response) => {
    const url = new URL(response.url());
    if (url.origin !== origin || !url.pathname.startsWith('/console/v1/')) return;
    answers.push(
      (async () => {
        try {
          const headers = new Headers(await response.allHeaders());
          const text = /^application\/json/.test(headers.get('content-type') ?? '') ? await response.text() : '';
          await expectConformance(origin, response.request().method(), url, response.status(), headers, text);
          return undefined;
        } catch (error) {
          return (error as Error).message;
        }
      })(),
    );
  });
}
