/**
 * priceBook: one long-lived workflow per task queue holding the price book every offer is
 * priced from. Runs read it with the `priceBook` query (no history event, no re-fetch per
 * run); it refreshes on a timer (daily by default), on `refreshPrices`, and carries the
 * book through continue-as-new.
 *
 *   loop: refreshPriceBook activity -> absorbRefresh -> memo -> wait (timer or signal)
 *   continue-as-new every REFRESHES_PER_RUN refreshes (each adds the book to history)
 */
import { condition, proxyActivities, setHandler, upsertMemo, workflowInfo } from '@temporalio/workflow';
import { absorbRefresh, nextRefreshMs, stampOf } from './book-state';
import { PRICE_BOOK_MEMO, type PriceBookActivities, type PriceBookInput, type PriceBookMemo, type PriceBookSettings, type PriceBookState } from './contract';
import { priceBookQuery, refreshPricesSignal } from './messages';
import { continueOnCurrentVersion, newVersionCurrent } from '../versions';

/** At a daily refresh, a new run every ~4 weeks; the history holds at most this many books. */
const REFRESHES_PER_RUN = 28;

const { refreshPriceBook } = proxyActivities<PriceBookActivities>({
  // Reading ~3,000 Compute Engine SKUs takes a few pages; the activity bounds each call itself.
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '5 seconds', backoffCoefficient: 2, maximumInterval: '5 minutes' },
});

export async function priceBook(input: PriceBookInput): Promise<void> {
  let settings: PriceBookSettings = input.settings;
  const state: PriceBookState = input.state ?? { refreshes: 0 };
  let wanted = state.book === undefined || input.refreshWanted === true;
  setHandler(priceBookQuery, () => {
    const next = nextRefreshMs(state, settings.refreshSeconds);
    return { book: state.book, stamp: stampOf(state), refreshes: state.refreshes, settings, ...(next !== undefined ? { nextRefreshAt: new Date(next).toISOString() } : {}) };
  });
  setHandler(refreshPricesSignal, (request) => {
    if (request.settings) settings = request.settings;
    wanted = true;
  });
  publishVersion(state);
  // A newer version moves the book at its next wake: a new worker's start signals it.
  for (let done = 0; done < REFRESHES_PER_RUN && !workflowInfo().continueAsNewSuggested && !newVersionCurrent(); ) {
    const due = nextRefreshMs(state, settings.refreshSeconds);
    if (!wanted && (due === undefined || Date.now() < due)) {
      // Waits for a signal, or for the next refresh when one is scheduled.
      if (due === undefined) await condition(() => wanted);
      else await condition(() => wanted, Math.max(1, due - Date.now()));
      continue;
    }
    wanted = false;
    absorbRefresh(state, await refreshPriceBook({ source: settings.source }), Date.now());
    publishVersion(state);
    done++;
  }
  await continueOnCurrentVersion<typeof priceBook>({ settings, state, refreshWanted: wanted });
}

/** Which book it holds, in its memo, for readers that keep the last one they read (activities/pricing). */
function publishVersion(state: PriceBookState): void {
  if (state.book === undefined) return;
  const memo: PriceBookMemo = { refreshes: state.refreshes };
  upsertMemo({ [PRICE_BOOK_MEMO]: memo });
}
