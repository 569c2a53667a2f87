/// The operator dashboard (issue 23): one document, one style sheet and one script, served by the
/// gateway under the same strict CSP as the redeem page (no inline script, nothing from elsewhere).
/// It calls the same public API as any client, with a member's session.
enum DashboardPage {
    static let html = """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Redeem dashboard</title>
    <link rel="stylesheet" href="/dashboard/app.css">
    <script src="/dashboard/app.js" defer></script>
    </head>
    <body>
    <header class="top">
      <a class="brand" href="#coupons">Redeem</a>
      <nav id="nav" aria-label="Sections" hidden>
        <a href="#coupons">Coupons</a>
        <a href="#new">New coupon</a>
        <a href="#webhooks">Webhooks</a>
        <a href="#keys">API keys</a>
        <a href="#members">Members</a>
        <a href="#audit">Audit log</a>
      </nav>
      <div id="session" class="session" hidden>
        <label for="mode" class="inline">Mode</label>
        <select id="mode"><option value="live">Live</option><option value="test">Test</option></select>
        <span id="who" class="who"></span>
        <button type="button" id="sign-out" class="secondary">Sign out</button>
      </div>
    </header>
    <main>
      <p id="status" class="status" role="status" aria-live="polite"></p>
      <p id="test-banner" class="banner" hidden>Test mode: you see and change test data only.</p>

      <section id="view-signin" class="view" aria-labelledby="signin-title">
        <h1 id="signin-title" tabindex="-1">Sign in</h1>
        <form id="signin-form" novalidate>
          <label for="signin-email">Email</label>
          <input id="signin-email" type="email" autocomplete="email" required>
          <label for="signin-password">Password</label>
          <input id="signin-password" type="password" autocomplete="current-password" required>
          <div class="buttons"><button type="submit" id="signin-submit">Sign in</button></div>
        </form>
      </section>

      <section id="view-invite" class="view" aria-labelledby="invite-title" hidden>
        <h1 id="invite-title" tabindex="-1">Join the team</h1>
        <p>Choose a password (at least 10 characters). If you already have an account with the invited email, give its password.</p>
        <form id="invite-form" novalidate>
          <label for="invite-password">Password</label>
          <input id="invite-password" type="password" autocomplete="new-password" required aria-describedby="err-invite-password">
          <p class="field-error" id="err-invite-password"></p>
          <div class="buttons"><button type="submit" id="invite-submit">Join</button></div>
        </form>
      </section>

      <section id="view-coupons" class="view" aria-labelledby="coupons-title" hidden>
        <h1 id="coupons-title" tabindex="-1">Coupons</h1>
        <div class="toolbar">
          <label for="coupons-filter" class="inline">Show</label>
          <select id="coupons-filter"><option value="">All</option><option value="true">Active</option><option value="false">Inactive</option></select>
          <a class="button" href="#new">New coupon</a>
        </div>
        <div class="scroll"><table id="coupons-table">
          <caption class="sr-only">Coupons</caption>
          <thead><tr><th scope="col">Code</th><th scope="col">Kind</th><th scope="col">Discount</th><th scope="col">Redeemed / cap</th><th scope="col">State</th><th scope="col">Store offers</th></tr></thead>
          <tbody></tbody>
        </table></div>
        <div class="pager"><button type="button" id="coupons-prev" class="secondary" disabled>Previous</button><button type="button" id="coupons-next" class="secondary" disabled>Next</button></div>
      </section>

      <section id="view-new" class="view" aria-labelledby="new-title" hidden>
        <h1 id="new-title" tabindex="-1">New coupon</h1>
        <form id="coupon-form" novalidate>
          <div class="grid">
            <div><label for="f-code">Code</label><input id="f-code" autocomplete="off" autocapitalize="characters" spellcheck="false" maxlength="64" required aria-describedby="err-code"><p class="field-error" id="err-code"></p></div>
            <div><label for="f-kind">Kind</label><select id="f-kind" aria-describedby="err-kind"><option value="freePeriod">Free period</option><option value="percentOff">Percent off</option><option value="amountOff">Amount off</option></select><p class="field-error" id="err-kind"></p></div>
            <div data-kind="percentOff"><label for="f-percentOff">Percent off</label><input id="f-percentOff" type="number" min="1" max="100" aria-describedby="err-percentOff"><p class="field-error" id="err-percentOff"></p></div>
            <div data-kind="amountOff"><label for="f-amount">Amount off</label><input id="f-amount" inputmode="decimal" aria-describedby="err-amountOff"><p class="field-error" id="err-amountOff"></p></div>
            <div data-kind="amountOff"><label for="f-currency">Currency</label><input id="f-currency" maxlength="3" autocapitalize="characters" placeholder="EUR"></div>
            <div><label for="f-duration-count">Duration</label><input id="f-duration-count" type="number" min="1" value="1" aria-describedby="err-duration"><p class="field-error" id="err-duration"></p></div>
            <div><label for="f-duration-unit">Duration unit</label><select id="f-duration-unit"><option value="day">Days</option><option value="week">Weeks</option><option value="month" selected>Months</option><option value="year">Years</option></select></div>
            <div data-kind="discount"><label for="f-periodCount">Periods (periodCount)</label><input id="f-periodCount" type="number" min="1" aria-describedby="err-periodCount"><p class="field-error" id="err-periodCount"></p></div>
            <div><label for="f-productIds">Plans (product ids, comma-separated)</label><input id="f-productIds" autocomplete="off" aria-describedby="err-productIds"><p class="field-error" id="err-productIds"></p></div>
            <fieldset><legend>Platforms</legend>
              <label class="check"><input type="checkbox" id="f-ios" value="ios" checked> iOS</label>
              <label class="check"><input type="checkbox" id="f-android" value="android" checked> Android</label>
              <label class="check"><input type="checkbox" id="f-web" value="web" checked> Web</label>
              <p class="field-error" id="err-platforms"></p>
            </fieldset>
            <div><label for="f-startsAt">Starts (UTC, optional)</label><input id="f-startsAt" type="datetime-local" aria-describedby="err-startsAt"><p class="field-error" id="err-startsAt"></p></div>
            <div><label for="f-expiresAt">Expires (UTC, optional)</label><input id="f-expiresAt" type="datetime-local" aria-describedby="err-expiresAt"><p class="field-error" id="err-expiresAt"></p></div>
            <div><label for="f-maxRedemptions">Cap (maxRedemptions, optional)</label><input id="f-maxRedemptions" type="number" min="1" aria-describedby="err-maxRedemptions"><p class="field-error" id="err-maxRedemptions"></p></div>
            <div><label class="check"><input type="checkbox" id="f-newCustomersOnly"> New customers only</label></div>
          </div>
          <section class="limits" aria-labelledby="limits-title">
            <h2 id="limits-title">Store limits</h2>
            <p id="limits-state" aria-live="polite">Type to check the coupon against the stores' limits.</p>
            <ul id="limits-list"></ul>
          </section>
          <p class="field-error" id="err-form"></p>
          <div class="buttons"><button type="submit" id="coupon-save">Create coupon</button></div>
        </form>
      </section>

      <section id="view-coupon" class="view" aria-labelledby="coupon-title" hidden>
        <h1 id="coupon-title" tabindex="-1">Coupon</h1>
        <dl id="coupon-figures" class="figures"></dl>
        <h2>Store offers</h2>
        <p id="coupon-offers-empty">No store offers: this coupon is granted by Redeem.</p>
        <div class="scroll"><table id="coupon-offers" hidden><caption class="sr-only">Store offers</caption>
          <thead><tr><th scope="col">Store</th><th scope="col">Plan</th><th scope="col">State</th><th scope="col">Offer</th><th scope="col">Message</th></tr></thead><tbody></tbody></table></div>
        <h2>Change</h2>
        <form id="patch-form" novalidate>
          <div class="grid">
            <div><label for="p-maxRedemptions">Cap (empty: no cap)</label><input id="p-maxRedemptions" type="number" min="1" aria-describedby="err-p-maxRedemptions"><p class="field-error" id="err-p-maxRedemptions"></p></div>
            <div><label for="p-expiresAt">Expires (UTC, empty: no end)</label><input id="p-expiresAt" type="datetime-local" aria-describedby="err-p-expiresAt"><p class="field-error" id="err-p-expiresAt"></p></div>
          </div>
          <div class="buttons"><button type="submit" id="patch-save">Save changes</button><button type="button" id="deactivate" class="danger">Deactivate</button></div>
        </form>
        <h2>Redemptions</h2>
        <div class="toolbar">
          <label for="redemptions-filter" class="inline">Status</label>
          <select id="redemptions-filter"><option value="">All</option><option value="reserved">Reserved</option><option value="granting">Granting</option><option value="completed">Completed</option><option value="failed">Failed</option><option value="released">Released</option></select>
          <button type="button" id="csv" class="secondary">Download CSV</button>
        </div>
        <div class="scroll"><table id="redemptions-table"><caption class="sr-only">Redemptions</caption>
          <thead><tr><th scope="col">Who</th><th scope="col">Platform</th><th scope="col">Plan</th><th scope="col">Price paid</th><th scope="col">Status</th><th scope="col">Time (UTC)</th><th scope="col">Sandbox</th></tr></thead><tbody></tbody></table></div>
        <div class="pager"><button type="button" id="redemptions-more" class="secondary" hidden>More</button></div>
      </section>

      <section id="view-webhooks" class="view" aria-labelledby="webhooks-title" hidden>
        <h1 id="webhooks-title" tabindex="-1">Webhooks</h1>
        <form id="webhook-form" novalidate>
          <label for="w-url">Endpoint URL</label>
          <input id="w-url" type="url" placeholder="https://example.com/redeem-webhooks" aria-describedby="err-url"><p class="field-error" id="err-url"></p>
          <fieldset><legend>Events</legend>
            <label class="check"><input type="checkbox" id="w-redeemed" value="coupon.redeemed" checked> coupon.redeemed</label>
            <label class="check"><input type="checkbox" id="w-failed" value="redemption.failed" checked> redemption.failed</label>
            <p class="field-error" id="err-events"></p>
          </fieldset>
          <div class="buttons"><button type="submit">Add endpoint</button></div>
        </form>
        <p id="webhook-secret" class="secret" hidden></p>
        <div class="scroll"><table id="webhooks-table"><caption class="sr-only">Webhook endpoints</caption>
          <thead><tr><th scope="col">URL</th><th scope="col">Events</th><th scope="col">Active</th><th scope="col">Actions</th></tr></thead><tbody></tbody></table></div>
        <h2 id="deliveries-title">Recent deliveries</h2>
        <p id="deliveries-hint">Choose an endpoint's deliveries above.</p>
        <div class="scroll"><table id="deliveries-table" hidden><caption class="sr-only">Deliveries</caption>
          <thead><tr><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Created (UTC)</th></tr></thead><tbody></tbody></table></div>
      </section>

      <section id="view-keys" class="view" aria-labelledby="keys-title" hidden>
        <h1 id="keys-title" tabindex="-1">API keys</h1>
        <form id="key-form" novalidate>
          <div class="grid">
            <div><label for="k-name">Name</label><input id="k-name" aria-describedby="err-name"><p class="field-error" id="err-name"></p></div>
            <div><label for="k-role">Role</label><select id="k-role"><option value="readonly">readonly</option><option value="support">support</option><option value="admin">admin</option></select></div>
          </div>
          <div class="buttons"><button type="submit">Create key</button></div>
        </form>
        <p id="key-secret" class="secret" hidden></p>
        <div class="scroll"><table id="keys-table"><caption class="sr-only">API keys</caption>
          <thead><tr><th scope="col">Name</th><th scope="col">Prefix</th><th scope="col">Role</th><th scope="col">Mode</th><th scope="col">Last used (UTC)</th><th scope="col">Actions</th></tr></thead><tbody></tbody></table></div>
      </section>

      <section id="view-members" class="view" aria-labelledby="members-title" hidden>
        <h1 id="members-title" tabindex="-1">Members</h1>
        <form id="member-form" novalidate>
          <div class="grid">
            <div><label for="m-email">Email</label><input id="m-email" type="email" aria-describedby="err-email"><p class="field-error" id="err-email"></p></div>
            <div><label for="m-role">Role</label><select id="m-role"><option value="readonly">readonly</option><option value="support">support</option><option value="admin">admin</option></select></div>
          </div>
          <div class="buttons"><button type="submit">Invite</button></div>
        </form>
        <p id="invite-url" class="secret" hidden></p>
        <div class="scroll"><table id="members-table"><caption class="sr-only">Members</caption>
          <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Since (UTC)</th><th scope="col">Actions</th></tr></thead><tbody></tbody></table></div>
      </section>

      <section id="view-audit" class="view" aria-labelledby="audit-title" hidden>
        <h1 id="audit-title" tabindex="-1">Audit log</h1>
        <div class="toolbar">
          <label for="audit-type" class="inline">Object</label>
          <select id="audit-type"><option value="">Any</option><option value="coupon">Coupons</option><option value="plan">Plans</option><option value="apiKey">API keys</option><option value="webhook">Webhooks</option><option value="member">Members</option><option value="redemption">Redemptions</option></select>
          <label for="audit-object" class="inline">Id or code</label>
          <input id="audit-object" class="short">
          <button type="button" id="audit-apply" class="secondary">Filter</button>
        </div>
        <div class="scroll"><table id="audit-table"><caption class="sr-only">Audit log</caption>
          <thead><tr><th scope="col">Time (UTC)</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Object</th><th scope="col">Change</th></tr></thead><tbody></tbody></table></div>
        <div class="pager"><button type="button" id="audit-more" class="secondary" hidden>More</button></div>
      </section>
    </main>
    </body>
    </html>
    """

    static let css = """
    :root { color-scheme: light dark; --accent: #3b5bdb; --bad: #c92a2a; --good: #2b8a3e; --line: #ced4da; }
    * { box-sizing: border-box; }
    body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
    .top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1rem; padding: .6rem 1rem; border-bottom: 1px solid var(--line); }
    .brand { font-weight: 800; font-size: 1.15rem; text-decoration: none; color: inherit; }
    nav { display: flex; flex-wrap: wrap; gap: .25rem .9rem; }
    nav a { color: var(--accent); text-decoration: none; padding: .3rem 0; }
    nav a[aria-current="page"] { font-weight: 700; text-decoration: underline; }
    .session { margin-left: auto; display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; }
    .who { font-size: .9rem; color: #666; overflow-wrap: anywhere; }
    main { max-width: 72rem; margin: 0 auto; padding: 1rem 1rem 3rem; }
    h1 { font-size: 1.5rem; margin: .5rem 0 1rem; }
    h1:focus { outline: none; }
    h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
    label { display: block; font-weight: 600; margin-top: .6rem; }
    label.inline { display: inline; margin: 0; }
    label.check { display: inline-flex; align-items: center; gap: .35rem; font-weight: 400; margin-right: 1rem; }
    fieldset { border: 1px solid var(--line); border-radius: .4rem; margin: .6rem 0 0; padding: .4rem .8rem; }
    legend { font-weight: 600; }
    input, select { font: inherit; padding: .45rem .6rem; border: 1px solid #868e96; border-radius: .35rem; max-width: 100%; }
    input:not([type=checkbox]), select { width: 100%; }
    .toolbar select, .toolbar input, .session select { width: auto; }
    input.short { width: 12rem; }
    input:focus, select:focus, button:focus, a:focus { outline: 3px solid var(--accent); outline-offset: 2px; }
    .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr)); gap: 0 1rem; }
    .buttons, .toolbar, .pager { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; margin: .8rem 0; }
    button, a.button { font: inherit; padding: .45rem 1rem; border-radius: .35rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; min-height: 40px; text-decoration: none; display: inline-flex; align-items: center; }
    button.secondary { background: transparent; color: var(--accent); }
    button.danger { background: var(--bad); border-color: var(--bad); }
    button.small { min-height: 32px; padding: .2rem .6rem; font-size: .9rem; }
    button:disabled { opacity: .5; cursor: not-allowed; }
    .status { min-height: 1.5em; font-weight: 600; margin: 0 0 .5rem; }
    .status.error, .field-error { color: var(--bad); }
    .field-error { font-size: .9rem; margin: .2rem 0 0; min-height: 0; }
    .field-error:empty { display: none; }
    .banner { background: #fff3bf; color: #5c3c00; padding: .4rem .8rem; border-radius: .35rem; }
    .secret { padding: .6rem .8rem; border-left: 4px solid var(--good); background: rgba(43, 138, 62, .08); overflow-wrap: anywhere; font-family: ui-monospace, monospace; }
    .scroll { overflow-x: auto; }
    table { border-collapse: collapse; width: 100%; min-width: 36rem; }
    th, td { text-align: left; padding: .4rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
    td.mono, .mono { font-family: ui-monospace, monospace; font-size: .9rem; overflow-wrap: anywhere; }
    .figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(9rem, 1fr)); gap: .5rem 1rem; margin: 0; }
    .figures div { border: 1px solid var(--line); border-radius: .4rem; padding: .5rem .7rem; }
    .figures dt { font-size: .85rem; color: #666; }
    .figures dd { margin: 0; font-weight: 700; overflow-wrap: anywhere; }
    .limits { border: 1px solid var(--line); border-radius: .4rem; padding: .2rem 1rem .6rem; margin-top: 1rem; }
    .limits li.bad { color: var(--bad); font-weight: 600; }
    .sr-only { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
    details pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: .8rem; margin: .3rem 0; }
    [hidden] { display: none !important; }
    """
}
