import Mustache

/// The operator's page's HTML: Mustache templates (every `{{value}}` HTML-escaped; `{{{body}}}` only for a page
/// this code rendered) and one small style sheet. No script: every action is a form.
enum ConsoleTemplates {
    static let library: MustacheLibrary = {
        MustacheContentTypes.register(ScalarHTML(), named: "SCALAR_HTML")
        var library = MustacheLibrary()
        for (name, text) in templates {
            do {
                try library.register("{{% CONTENT_TYPE: SCALAR_HTML}}" + text, named: name)
            } catch {
                preconditionFailure("console template \(name) does not parse: \(error)")  // a build-time constant
            }
        }
        return library
    }()

    static func render(_ name: String, _ context: [String: Any]) -> String {
        library.render(withoutEmptyStrings(context), withTemplate: name) ?? ""
    }

    /// Mustache takes an empty string as true in `{{#field}}`: an empty value is left out, so its section is skipped.
    static func withoutEmptyStrings(_ value: Any) -> Any {
        switch value {
        case let dictionary as [String: Any]:
            return dictionary.compactMapValues { ($0 as? String)?.isEmpty == true ? nil : withoutEmptyStrings($0) }
        case let list as [[String: Any]]:
            return list.map { withoutEmptyStrings($0) }
        default:
            return value
        }
    }

    /// HTML escaping by Unicode scalar. The library's own escapes by `Character`, and a `"` followed by a combining
    /// mark is one character that is not `"`: it would pass unescaped and end an attribute value.
    struct ScalarHTML: MustacheContentType {
        func escapeText(_ text: String) -> String {
            var escaped = String.UnicodeScalarView()
            for scalar in text.unicodeScalars {
                switch scalar {
                case "<": escaped.append(contentsOf: "&lt;".unicodeScalars)
                case ">": escaped.append(contentsOf: "&gt;".unicodeScalars)
                case "&": escaped.append(contentsOf: "&amp;".unicodeScalars)
                case "\"": escaped.append(contentsOf: "&quot;".unicodeScalars)
                case "'": escaped.append(contentsOf: "&#39;".unicodeScalars)
                default: escaped.append(scalar)
                }
            }
            return String(escaped)
        }
    }

    static let templates: [String: String] = [
        "layout": """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · rc-relay</title>
        <link rel="stylesheet" href="/console/style.css">
        </head>
        <body>
        <header>
        <a class="brand" href="/console">rc-relay</a>
        {{#signedIn}}
        <nav aria-label="Pages">
        <a href="/console"{{#overview}} aria-current="page"{{/overview}}>Overview</a>
        <a href="/console/deliveries"{{#deliveriesPage}} aria-current="page"{{/deliveriesPage}}>Deliveries</a>
        <a href="/console/schedules"{{#schedulesPage}} aria-current="page"{{/schedulesPage}}>Waves and quiet periods</a>
        <a href="/console/routes"{{#routesPage}} aria-current="page"{{/routesPage}}>Routes</a>
        <a href="/console/preview"{{#previewPage}} aria-current="page"{{/previewPage}}>Preview</a>
        <a href="/console/chart"{{#chartPage}} aria-current="page"{{/chartPage}}>Fetch load</a>
        </nav>
        <form method="post" action="/console/sign-out" class="inline">
        <input type="hidden" name="csrf" value="{{csrf}}">
        <button type="submit">Sign out</button>
        </form>
        {{/signedIn}}
        </header>
        <main>
        <h1>{{title}}</h1>
        {{#notice}}<p class="notice" role="status">{{notice}}</p>{{/notice}}
        {{{body}}}
        </main>
        <footer>rc-relay {{version}} · times in UTC</footer>
        </body>
        </html>
        """,
        "sign-in": """
        <form method="post" action="/console/sign-in" class="card">
        {{#error}}<p class="error" role="alert">{{error}}</p>{{/error}}
        <label for="token">Admin token</label>
        <input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
        <p class="hint">A token from <code>admin.tokens</code>. It is exchanged for a session cookie and never shown again.</p>
        <button type="submit">Sign in</button>
        </form>
        """,
        "overview": """
        <section aria-labelledby="checks">
        <h2 id="checks">Readiness</h2>
        <ul class="checks">
        {{#checks}}<li><span class="{{#ok}}ok{{/ok}}{{^ok}}bad{{/ok}}">{{#ok}}OK{{/ok}}{{^ok}}FAILING{{/ok}}</span> <strong>{{name}}</strong>: {{detail}}</li>{{/checks}}
        </ul>
        <p>Projects: {{#projects}}<code>{{.}}</code> {{/projects}}</p>
        </section>
        <section aria-labelledby="activity">
        <h2 id="activity">The last 24 hours</h2>
        <figure>{{{activity}}}</figure>
        </section>
        <section aria-labelledby="overview-waves">
        <h2 id="overview-waves">Waves under way</h2>
        {{^waves}}<p>No wave under way.</p>{{/waves}}
        {{#waves}}
        <article class="wave">
        <h3><code>{{route}}</code> of <code>{{project}}</code>, version {{version}}</h3>
        <label>{{sent}} of {{shards}} shards sent <progress max="{{shards}}" value="{{sent}}">{{sent}} of {{shards}}</progress></label>
        <p>{{#next}}Next shard {{next}}{{/next}}{{^next}}Every shard sent{{/next}}</p>
        </article>
        {{/waves}}
        </section>
        <section aria-labelledby="publishes">
        <h2 id="publishes">Last publishes</h2>
        {{^publishes}}<p>No version has been relayed since the start.</p>{{/publishes}}
        {{#publishes}}
        <article class="publish">
        <h3>Version {{version}} of <code>{{project}}</code> <small>{{when}}</small></h3>
        <ul>
        {{#pings}}<li><a href="/console/deliveries/{{id}}">{{route}}</a>: <span class="status {{status}}">{{status}}</span>{{#waiting}} ({{waiting}}){{/waiting}}</li>{{/pings}}
        </ul>
        </article>
        {{/publishes}}
        </section>
        """,
        "deliveries": """
        <form method="get" action="/console/deliveries" class="filters" aria-label="Filter deliveries">
        <label>Status <select name="status">
        {{#statuses}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{label}}</option>{{/statuses}}
        </select></label>
        <label>Route <input name="route" value="{{route}}" size="12"></label>
        <label>Project <input name="project" value="{{project}}" size="12"></label>
        <label>Version <input name="version" value="{{version}}" size="8" inputmode="numeric"></label>
        <button type="submit">Filter</button>
        </form>
        {{#problem}}<p class="error" role="alert">{{problem}}</p>{{/problem}}
        <table>
        <caption>{{count}} ping(s), newest first</caption>
        <thead><tr><th scope="col">Received</th><th scope="col">Project</th><th scope="col">Version</th><th scope="col">Route</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Action</th></tr></thead>
        <tbody>
        {{#rows}}
        <tr>
        <td>{{when}}</td><td>{{project}}</td><td>{{version}}</td>
        <td><a href="/console/deliveries/{{id}}">{{route}}</a></td>
        <td><span class="status {{status}}">{{status}}</span>{{#waiting}}<br><small>{{waiting}}</small>{{/waiting}}</td>
        <td>{{attempts}}</td>
        <td>{{#retryable}}<form method="post" action="/console/deliveries/{{id}}/retry" class="inline"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit" aria-label="Retry ping {{id}}">Retry</button></form>{{/retryable}}</td>
        </tr>
        {{/rows}}
        </tbody>
        </table>
        """,
        "delivery": """
        <dl class="facts">
        <dt>Ping</dt><dd><code>{{id}}</code></dd>
        <dt>Project</dt><dd>{{project}}</dd>
        <dt>Route</dt><dd>{{route}}</dd>
        <dt>Version</dt><dd>{{version}}</dd>
        <dt>Status</dt><dd><span class="status {{status}}">{{status}}</span></dd>
        <dt>Origin</dt><dd>{{origin}}{{#retryOf}} (retry of <a href="/console/deliveries/{{retryOf}}">{{retryOf}}</a>){{/retryOf}}</dd>
        <dt>Audience</dt><dd>{{audience}}</dd>
        {{#decision}}<dt>Decision</dt><dd>{{decision}}</dd>{{/decision}}
        {{#waiting}}<dt>Waiting for</dt><dd>{{waiting}}</dd>{{/waiting}}
        <dt>Received</dt><dd>{{received}}</dd>
        {{#settled}}<dt>Settled</dt><dd>{{settled}}</dd>{{/settled}}
        {{#messageName}}<dt>FCM message</dt><dd><code>{{messageName}}</code></dd>{{/messageName}}
        {{#traceId}}<dt>Trace</dt><dd><code class="trace-id">{{traceId}}</code></dd>{{/traceId}}
        {{#error}}<dt>Last error</dt><dd>{{error}}</dd>{{/error}}
        </dl>
        {{#retryable}}<form method="post" action="/console/deliveries/{{id}}/retry"><input type="hidden" name="csrf" value="{{csrf}}"><button type="submit">Retry this ping</button></form>{{/retryable}}
        <table>
        <caption>Attempts</caption>
        <thead><tr><th scope="col">#</th><th scope="col">Time</th><th scope="col">HTTP status</th><th scope="col">FCM error code</th></tr></thead>
        <tbody>
        {{#attempts}}<tr><td>{{number}}</td><td>{{at}}</td><td>{{httpStatus}}</td><td>{{errorCode}}</td></tr>{{/attempts}}
        </tbody>
        </table>
        """,
        "schedules": """
        <section aria-labelledby="waves">
        <h2 id="waves">Waves</h2>
        {{^waves}}<p>No wave under way.</p>{{/waves}}
        {{#waves}}
        <article class="wave">
        <h3><code>{{route}}</code> of <code>{{project}}</code>, version {{version}}</h3>
        <label>{{sent}} of {{shards}} shards sent <progress max="{{shards}}" value="{{sent}}">{{sent}} of {{shards}}</progress></label>
        <p>Started {{started}}{{#next}}; next shard {{next}}{{/next}}</p>
        </article>
        {{/waves}}
        </section>
        <section aria-labelledby="quiet">
        <h2 id="quiet">Quiet periods</h2>
        {{^quiet}}<p>No ping is waiting out a quiet period.</p>{{/quiet}}
        {{#hasQuiet}}
        <table>
        <thead><tr><th scope="col">Project</th><th scope="col">Route</th><th scope="col">Audience</th><th scope="col">Version</th><th scope="col">Goes</th></tr></thead>
        <tbody>{{#quiet}}<tr><td>{{project}}</td><td>{{route}}</td><td>{{audience}}</td><td>{{version}}</td><td>{{until}}</td></tr>{{/quiet}}</tbody>
        </table>
        {{/hasQuiet}}
        </section>
        """,
        "routes": """
        {{#projects}}
        <section>
        <h2>Project <code>{{id}}</code></h2>
        <table>
        <thead><tr><th scope="col">Route</th><th scope="col">Audience</th><th scope="col">When</th><th scope="col">Data</th><th scope="col">Schedule</th></tr></thead>
        <tbody>
        {{#routes}}<tr><td>{{name}}</td><td><code>{{target}}</code></td><td>{{when}}</td><td><code>{{data}}</code></td><td>{{schedule}}{{#chart}} (<a href="{{chart}}">fetch-load chart</a>){{/chart}}</td></tr>{{/routes}}
        </tbody>
        </table>
        </section>
        {{/projects}}
        """,
        "preview": """
        <form method="get" action="/console/preview" class="filters" aria-label="Preview a version">
        <label>Project <select name="project">{{#projects}}<option value="{{id}}"{{#selected}} selected{{/selected}}>{{id}}</option>{{/projects}}</select></label>
        <label>Version <input name="version" value="{{version}}" size="8" inputmode="numeric" required></label>
        <label>Update type <select name="updateType">{{#updateTypes}}<option value="{{value}}"{{#selected}} selected{{/selected}}>{{value}}</option>{{/updateTypes}}</select></label>
        <label>Compared with version <input name="since" value="{{since}}" size="8" inputmode="numeric" aria-describedby="since-hint"></label>
        <label><input type="checkbox" name="explain"{{#explain}} checked{{/explain}}> Explain what changed</label>
        <button type="submit">Preview</button>
        </form>
        <p class="hint" id="since-hint">Empty: the version before. Nothing is sent: this shows what the relay would send for this version.</p>
        {{#problem}}<p class="error" role="alert">{{problem}}</p>{{/problem}}
        {{#result}}
        <section aria-labelledby="change">
        <h2 id="change">What version {{version}} changed{{#since}} since version {{since}}{{/since}}</h2>
        {{#notFetched}}<p>Not fetched: no route of this project depends on the change. Tick “Explain what changed” to see it.</p>{{/notFetched}}
        {{#unknown}}<p class="error">Not known: {{unknown}}. Change-aware routes ping their whole audience.</p>{{/unknown}}
        {{#hasParameters}}<table><caption>Parameters</caption><thead><tr><th scope="col">Parameter</th><th scope="col">Change</th><th scope="col">Conditions</th></tr></thead>
        <tbody>{{#parameters}}<tr><td><code>{{name}}</code></td><td>{{kind}}</td><td>{{conditions}}</td></tr>{{/parameters}}</tbody></table>{{/hasParameters}}
        {{#hasConditions}}<table><caption>Conditions</caption><thead><tr><th scope="col">Condition</th><th scope="col">Change</th></tr></thead>
        <tbody>{{#conditions}}<tr><td><code>{{name}}</code></td><td>{{kind}}</td></tr>{{/conditions}}</tbody></table>{{/hasConditions}}
        {{#reordered}}<p>The conditions were re-ordered: any device may be affected.</p>{{/reordered}}
        {{#nothing}}<p>Nothing changed in parameters or conditions.</p>{{/nothing}}
        </section>
        <section aria-labelledby="decisions">
        <h2 id="decisions">Who would be pinged</h2>
        <table><thead><tr><th scope="col">Route</th><th scope="col">Fires</th><th scope="col">To</th><th scope="col">Why</th></tr></thead>
        <tbody>{{#decisions}}<tr><td>{{route}}</td><td>{{#fires}}yes{{/fires}}{{^fires}}no{{/fires}}</td><td>{{targets}}</td><td>{{reason}}</td></tr>{{/decisions}}</tbody></table>
        </section>
        <section aria-labelledby="requests">
        <h2 id="requests">The FCM requests</h2>
        {{^requests}}<p>None.</p>{{/requests}}
        {{#requests}}<h3>{{route}}</h3><pre>{{json}}</pre>{{/requests}}
        </section>
        {{/result}}
        """,
        "chart": """
        <form method="get" action="/console/chart" class="filters" aria-label="Fetch-load settings">
        <label>Devices <input name="devices" value="{{devices}}" size="10" inputmode="numeric"></label>
        <label>Shards <input name="shards" value="{{shards}}" size="5" inputmode="numeric"></label>
        <label>Spread (s) <input name="spread" value="{{spread}}" size="6" inputmode="numeric"></label>
        <label>Client delay (s) <input name="delay" value="{{delay}}" size="6" inputmode="numeric"></label>
        <label>FCM delivery (s) <input name="delivery" value="{{delivery}}" size="4" inputmode="numeric"></label>
        <label>Backend limit (fetches/s) <input name="limit" value="{{limit}}" size="8" inputmode="numeric"></label>
        <button type="submit">Draw</button>
        </form>
        {{#problem}}<p class="error" role="alert">{{problem}}</p>{{/problem}}
        {{#image}}
        <p><img src="{{image}}" width="1000" height="580" alt="Expected device fetches per second after a publish: {{summary}}"></p>
        <ul>{{#peaks}}<li>Peak {{name}}: {{peak}} fetches/s at {{at}} s; all fetched by {{end}} s</li>{{/peaks}}{{#overLimit}}<li>{{overLimit}}</li>{{/overLimit}}</ul>
        <p><a href="{{png}}" download="fetch-load.png">The chart as a PNG</a>, to paste in a chat.</p>
        {{/image}}
        <p class="hint">The model of <code>rc-relay simulate</code> (docs/waves.md): every device online, each delivered within the FCM delivery window, then waiting up to the client delay.</p>
        """,
    ]
}
