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
