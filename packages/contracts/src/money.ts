/**
 * Money is held as integer micro-dollars (1 USD = 1,000,000) everywhere inside the system.
 * Only the API edge converts to and from a number of USD.
 */
export const MICROS_PER_USD = 1_000_000;

export type Micros = number;

/** Converts a USD amount from the API edge; rejects what cannot be represented exactly in micros. */
export function usdToMicros(usd: number): Micros {
  if (!Number.isFinite(usd)) throw new RangeError('amount must be a finite number');
  const micros = Math.round(usd * MICROS_PER_USD);
  if (!Number.isSafeInteger(micros)) throw new RangeError('amount is too large');
  if (Math.abs(micros - usd * MICROS_PER_USD) > 1e-3) throw new RangeError('amount has more than 6 decimal places');
  return micros;
}

export function microsToUsd(micros: Micros): number {
  return micros / MICROS_PER_USD;
}

/** `$1.50`, `$0.000080`: enough digits to never hide a micro-dollar. */
export function formatUsd(micros: Micros): string {
  const sign = micros < 0 ? '-' : '';
  const abs = Math.abs(micros);
  const whole = Math.floor(abs / MICROS_PER_USD);
  const frac = String(abs % MICROS_PER_USD).padStart(6, '0').replace(/0+$/, '');
  return `${sign}$${whole}.${frac.length < 2 ? frac.padEnd(2, '0') : frac}`;
}
