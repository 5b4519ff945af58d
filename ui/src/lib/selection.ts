// What a replay or a fix acts on, as the person saw it counted.

import type { ReplaySelection } from './api/wire';

/** The selection as it stood when a preview counted it (`asOf`, the server's clock): its filter then matches only
 * dead letters parked before that instant. Replaying the pinned selection replays exactly the leads the person
 * was shown and confirmed; dead letters of the same cause that arrive meanwhile stay in the list for the next look
 * (without the pin they would make the confirmed count wrong and the server would refuse). The same as the
 * server's `ReplaySelection::as_of`. */
export function pinned(selection: ReplaySelection, asOf: string): ReplaySelection {
  const filter = selection.filter;
  if (!filter) return selection;
  const until = filter.until && Date.parse(filter.until) < Date.parse(asOf) ? filter.until : asOf;
  return { ...selection, filter: { ...filter, until } };
}
