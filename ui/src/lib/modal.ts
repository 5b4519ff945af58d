// A Svelte action for modal dialogs: focus moves into the dialog when it opens, Tab and Shift+Tab stay inside it,
// Escape closes it (unless `canClose` says no), and focus returns to where it was when the dialog closes.

const FOCUSABLE = 'button:not([disabled]), [href], input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex="-1"])';

export interface ModalOptions {
  /** Called on Escape. */
  onescape: () => void;
  /** Whether Escape may close the dialog now (e.g. not while a request runs). Default: always. */
  canClose?: () => boolean;
}

/** The focusable elements of `root`, in document order. Exported for the unit test. */
export function focusables(root: HTMLElement): HTMLElement[] {
  return Array.from(root.querySelectorAll<HTMLElement>(FOCUSABLE)).filter((el) => !el.hasAttribute('inert'));
}

export function modal(node: HTMLElement, options: ModalOptions) {
  let opts = options;
  const before = document.activeElement as HTMLElement | null;
  // Focus the first field if there is one (a reason, a note), else the first button.
  queueMicrotask(() => {
    const all = focusables(node);
    const field = all.find((el) => el.matches('input, select, textarea'));
    (field ?? all[0] ?? node).focus();
  });
  function onkeydown(e: KeyboardEvent) {
    if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      if (opts.canClose?.() ?? true) opts.onescape();
      return;
    }
    if (e.key !== 'Tab') return;
    const all = focusables(node);
    if (all.length === 0) {
      e.preventDefault();
      return;
    }
    const first = all[0]!;
    const last = all[all.length - 1]!;
    const active = document.activeElement as HTMLElement | null;
    if (e.shiftKey && (active === first || !node.contains(active))) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && (active === last || !node.contains(active))) {
      e.preventDefault();
      first.focus();
    }
  }
  if (!node.hasAttribute('tabindex')) node.setAttribute('tabindex', '-1');
  node.addEventListener('keydown', onkeydown);
  return {
    update(next: ModalOptions) {
      opts = next;
    },
    destroy() {
      node.removeEventListener('keydown', onkeydown);
      if (before && document.contains(before)) before.focus();
    },
  };
}
