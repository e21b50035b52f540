import { notFound } from '@oc/contracts';
import type { Collection, Document, Filter } from './port';

export interface PageRequest {
  limit: number;
  /** Id of the last item of the previous page (OpenAI's and Stripe's cursor). */
  after?: string | undefined;
  order?: 'asc' | 'desc';
}

/**
 * Cursor pagination over a read model sorted by a numeric field with `_id` as tie-breaker, so a page
 * boundary never skips or repeats an item even when many share the same timestamp. Declare an index on
 * the filter's equality fields followed by `sortField` so that every page is an index range.
 */
export async function pageAfter<T extends Document>(
  collection: Collection<T>,
  filter: Filter,
  sortField: string,
  page: PageRequest,
): Promise<{ data: T[]; has_more: boolean }> {
  let after: unknown[] | undefined;
  if (page.after !== undefined) {
    const cursor = await collection.findOne({ ...filter, _id: page.after });
    if (!cursor) throw notFound('invalid_cursor', `No item with id '${page.after}' to page after.`);
    after = [cursor[sortField], cursor._id];
  }
  const direction = (page.order ?? 'desc') === 'desc' ? -1 : 1;
  const rows = await collection.find(filter, {
    sort: { [sortField]: direction, _id: direction },
    limit: page.limit + 1,
    ...(after ? { after } : {}),
  });
  return { data: rows.slice(0, page.limit), has_more: rows.length > page.limit };
}

/**
 * The distinct string values of `field` among the documents matching `filter`, in order: one index seek per
 * value (a loose index scan), however many documents share each. Declare an index on the filter's equality
 * fields followed by `field`. Documents without the field are not counted.
 */
export async function distinctValues<T extends Document>(collection: Collection<T>, field: string, filter: Filter = {}): Promise<string[]> {
  const values: string[] = [];
  for (;;) {
    const last = values.at(-1);
    const [next] = await collection.find({ ...filter, [field]: { $gt: last ?? '' } }, { sort: { [field]: 1 }, limit: 1 });
    const value = next?.[field];
    if (typeof value !== 'string') return values;
    values.push(value);
  }
}
