import type { VideoBilling } from '@oc/contracts';

/** Money arrives as USD numbers; amounts under a cent keep their digits rather than showing $0.00. */
export function usd(amount: number): string {
  const digits = amount !== 0 && Math.abs(amount) < 0.01 ? 6 : 2;
  return new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: digits }).format(amount);
}

/** Unix seconds as the reader's local date and time. */
export function when(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return '—';
  return new Date(seconds * 1000).toLocaleString('en-GB', { dateStyle: 'medium', timeStyle: 'short' });
}

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * A count per day over `days` days. Never 0 for a count that is not: under 0.1 a day it says so, under 10 it
 * keeps one decimal (3 requests in 7 days are 0.4 a day, not 0).
 */
export function perDay(count: number, days: number): string {
  if (count === 0) return '0';
  const average = count / days;
  if (average < 0.1) return '<0.1';
  if (average < 10) return average.toFixed(1).replace(/\.0$/, '');
  return Math.round(average).toLocaleString('en-US');
}

/** A video's cost as its organization pays it: a test key's and a failed video's price is never charged. */
export function videoCost(video: { 'x-billing': VideoBilling; 'x-cost': { amount: number } }): string {
  const price = usd(video['x-cost'].amount);
  switch (video['x-billing']) {
    case 'charged':
      return price;
    case 'reserved':
      return `${price} reserved`;
    case 'test':
      return 'Not charged (test key)';
    case 'released':
      return 'Not charged (failed)';
  }
}
