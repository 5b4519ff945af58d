// Loaded before the app: if the UI fails to start, say so on the page instead of showing a blank window.
function show(message: string) {
  const root = document.getElementById('app');
  if (!root || root.querySelector('.shell')) return;
  root.innerHTML = '';
  const box = document.createElement('pre');
  box.setAttribute('role', 'alert');
  box.style.cssText = 'margin:24px;padding:16px;border:1px solid #b91c1c;border-radius:8px;color:#b91c1c;white-space:pre-wrap;font:13px monospace';
  box.textContent = `Leadline's window could not start:\n\n${message}`;
  root.appendChild(box);
}
window.addEventListener('error', (e) => show(`${e.message}\n${e.filename}:${e.lineno}:${e.colno}`));
window.addEventListener('unhandledrejection', (e) => show(String((e.reason as Error)?.stack ?? e.reason)));

// Under LANG=C, WebKitGTK reports navigator.language = "C", which Intl rejects; libraries that format numbers
// at load time (uPlot) would then fail. Correct it before anything else runs.
try {
  new Intl.NumberFormat(navigator.language);
} catch {
  Object.defineProperty(navigator, 'language', { value: 'en-US', configurable: true });
  Object.defineProperty(navigator, 'languages', { value: ['en-US'], configurable: true });
}
