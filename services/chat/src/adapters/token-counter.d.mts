/** The part of gpt-tokenizer that counting needs. */
export interface TokenLimitCounter {
  isWithinTokenLimit(text: string, tokenLimit: number): false | number;
}

export function countBounded(lib: TokenLimitCounter, text: string, cap: number): number;
