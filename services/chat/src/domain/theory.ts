import type { TheoryPosition } from '@oc/contracts';

/** The spec's four reference corners of the theory plane. */
export const THEORY_CORNERS = [
  { name: 'voluntarism', focus: 'grassroots mobilization', x: -1, y: -1 },
  { name: 'structuralism', focus: 'policy and systems change', x: 1, y: -1 },
  { name: 'subjectivism', focus: 'cultural transformation', x: -1, y: 1 },
  { name: 'theurgism', focus: 'faith-based activism', x: 1, y: 1 },
] as const;

export type TheoryCorner = (typeof THEORY_CORNERS)[number]['name'];

export interface TheoryWeight {
  corner: TheoryCorner;
  focus: string;
  weight: number;
}

/**
 * Bilinear blend of the corners: each corner's weight is the area of the rectangle opposite it, so a
 * corner position is that corner alone, the origin is an even mix, and the weights always sum to 1.
 */
export function theoryWeights(position: TheoryPosition): TheoryWeight[] {
  return THEORY_CORNERS.map((c) => ({
    corner: c.name,
    focus: c.focus,
    weight: ((1 + c.x * position.x) * (1 + c.y * position.y)) / 4,
  }));
}

/** The instruction the upstream model receives, heaviest emphasis first, in whole percent. */
export function theoryInstruction(position: TheoryPosition): string {
  const parts = theoryWeights(position)
    .filter((w) => w.weight > 0)
    .sort((a, b) => b.weight - a.weight)
    .map((w) => `${w.corner} (${w.focus}) ${Math.round(w.weight * 100)}%`);
  return `Steer the emphasis of your reply by this blend of theories of change: ${parts.join(', ')}.`;
}
