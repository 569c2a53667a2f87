/// The redeem page (SPEC §4.5): one small document, its script and its style, served by the
/// gateway with no external assets and no inline script (the CSP forbids it).
enum RedeemPage {
    static let html = """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Redeem a code</title>
    <link rel="stylesheet" href="/redeem/app.css">
    <script src="/redeem/app.js" defer></script>
    </head>
    <body>
    <main>
      <h1>Redeem a code</h1>
      <p id="status" class="status" role="status" aria-live="polite"></p>

      <section id="account" aria-labelledby="account-title">
        <h2 id="account-title">1. Your account</h2>
        <p id="signed-in" hidden>Signed in as <strong id="signed-in-email"></strong>. <button type="button" id="sign-out" class="link">Sign out</button></p>
        <form id="auth-form" novalidate>
          <label for="email">Email</label>
          <input id="email" name="email" type="email" autocomplete="email" required>
          <label for="password">Password</label>
          <input id="password" name="password" type="password" autocomplete="current-password" required minlength="10" aria-describedby="password-hint">
          <p id="password-hint" class="hint">At least 10 characters.</p>
          <div class="buttons">
            <button type="submit" id="sign-in">Sign in</button>
            <button type="button" id="sign-up" class="secondary">Create account</button>
          </div>
        </form>
        <div id="apple-area" class="apple-area" hidden>
          <p class="or">or</p>
          <button type="button" id="apple-sign-in" class="apple">Sign in with Apple</button>
        </div>
      </section>

      <section id="redeem" aria-labelledby="redeem-title">
        <h2 id="redeem-title">2. Your code</h2>
        <form id="code-form" novalidate>
          <label for="code">Code</label>
          <input id="code" name="code" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="64" required>
          <div class="buttons">
            <button type="submit" id="check">Check code</button>
            <button type="button" id="redeem-button" disabled>Redeem</button>
          </div>
        </form>
        <p id="offer" class="offer" hidden></p>
      </section>

      <section id="result" aria-labelledby="result-title" hidden>
        <h2 id="result-title" tabindex="-1">Done</h2>
        <p id="result-text" class="result"></p>
      </section>
    </main>
    </body>
    </html>
    """

    /// The page with its "Sign in with Apple" button shown (the web flow is configured).
    static let htmlWithApple = html.replacingOccurrences(of: #"<div id="apple-area" class="apple-area" hidden>"#, with: #"<div id="apple-area" class="apple-area">"#)

    static let css = """
    :root { color-scheme: light dark; --accent: #3b5bdb; --bad: #c92a2a; --good: #2b8a3e; }
    * { box-sizing: border-box; }
    body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
    main { max-width: 34rem; margin: 0 auto; padding: 1.5rem 1rem 3rem; }
    h1 { font-size: 1.6rem; margin: 0 0 1rem; }
    h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
    label { display: block; font-weight: 600; margin-top: .75rem; }
    input { width: 100%; font: inherit; padding: .6rem .7rem; border: 1px solid #868e96; border-radius: .4rem; }
    input:focus, button:focus { outline: 3px solid var(--accent); outline-offset: 2px; }
    .buttons { display: flex; flex-wrap: wrap; gap: .5rem; margin-top: 1rem; }
    button { font: inherit; padding: .6rem 1.1rem; border-radius: .4rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; min-height: 44px; }
    button.secondary { background: transparent; color: var(--accent); }
    button.link { border: 0; background: none; color: var(--accent); text-decoration: underline; padding: 0; min-height: 0; }
    button:disabled { opacity: .5; cursor: not-allowed; }
    .hint { font-size: .9rem; margin: .25rem 0 0; color: #666; }
    .status { min-height: 1.5em; font-weight: 600; }
    .status.error { color: var(--bad); }
    .offer { padding: .75rem; border-left: 4px solid var(--accent); background: rgba(59, 91, 219, .08); }
    .result { font-size: 1.25rem; font-weight: 700; color: var(--good); }
    .or { margin: 1rem 0 .5rem; color: #666; }
    button.apple { background: #000; border-color: #000; color: #fff; width: 100%; }
    """
}
