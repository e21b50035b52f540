/**
 * Prompts refused at creation (422) before anything is reserved: only unambiguous requests for sexual
 * content involving minors, and for real-person sexual deepfakes or gore. Everything subtler is the
 * upstream's moderation, which fails the job with `content_policy_violation`.
 */
const CLEAR_VIOLATIONS: RegExp[] = [
  /\b(child|children|minor|minors|underage|kid|kids|teen|preteen)\b.{0,40}\b(porn|pornographic|nude|naked|sexual|explicit)\b/i,
  /\b(porn|pornographic|nude|naked|sexual|explicit)\b.{0,40}\b(child|children|minor|minors|underage|kid|kids|preteen)\b/i,
  /\bcsam\b/i,
  /\b(beheading|dismemberment)\b.{0,40}\b(real|graphic|gore)\b/i,
  /\bdeepfake\b.{0,40}\b(porn|nude|naked|sexual)\b/i,
];

export function violatesContentPolicy(prompt: string): boolean {
  return CLEAR_VIOLATIONS.some((rule) => rule.test(prompt));
}
