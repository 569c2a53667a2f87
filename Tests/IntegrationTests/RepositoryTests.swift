import Foundation
import TestSupport
import Testing

/// Checks on the repository's own deployment files.
@Suite struct RepositoryTests {
    @Test func composeFileIsValid() async throws {
        let compose = ["/usr/bin/docker-compose", "/usr/local/bin/docker-compose"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        let path = try #require(compose, "docker-compose is installed by scripts/setup")
        let file = Project.root.appendingPathComponent("docker-compose.yml").path
        let config = try await offThePool { try Subprocess.run(path, ["-f", file, "config"]) }
        for service in ["postgres", "accounts", "coupons", "grants", "gateway"] {
            #expect(config.contains("  \(service):"), "compose defines \(service)")
        }
        #expect(config.contains("healthcheck"))
        // The stores' override (key files) and the compose suite's (images built here, the fakes).
        for override in ["docker-compose.stores.yml", "deploy/compose/test.yml"] {
            let other = Project.root.appendingPathComponent(override).path
            let merged = try await offThePool { try Subprocess.run(path, ["-f", file, "-f", other, "config"]) }
            #expect(merged.contains("  gateway:"), "\(override) merges")
        }
    }

    /// Every setting docs/configuration.md says a service reads reaches that service's container in
    /// docker-compose.yml (itself, or its `_FILE` form). Who reads a setting comes from the
    /// document: a table's "read by" column ("all four", service names, "that service" for a name
    /// that carries the service's), else the section it is in ("Accounts", "Grants: the App Store",
    /// …), plus "the same setting X reads" and "X reads it too" in its meaning.
    @Test func composeHandsEverySettingToTheServicesThatReadIt() async throws {
        let compose = ["/usr/bin/docker-compose", "/usr/local/bin/docker-compose"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        let path = try #require(compose, "docker-compose is installed by scripts/setup")
        let doc = try String(
            contentsOf: Project.root.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        let readers = Self.readers(configuration: doc)
        #expect(readers.count > 100, "the document's settings are found (\(readers.count))")
        #expect(readers["REDEEM_ASC_PRIVATE_KEY"] == ["grants"])
        #expect(readers["REDEEM_APPLE_APP_ID"] == ["coupons", "grants", "gateway"])
        #expect(readers["REDEEM_LOG_LEVEL"]?.count == 4)

        // The configuration as compose reads it, as JSON (PyYAML comes with docker-compose).
        let file = Project.root.appendingPathComponent("docker-compose.yml").path
        let json = try await offThePool {
            try Subprocess.run(
                "/bin/sh",
                [
                    "-c",
                    "\"$0\" -f \"$1\" config | python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)'",
                    path, file
                ])
        }
        struct Config: Decodable {
            struct Service: Decodable { let environment: [String: String?]? }
            let services: [String: Service]
        }
        let config = try JSONDecoder().decode(Config.self, from: Data(json.utf8))
        // Compose's DNS finds every instance; a hosts file would be a mount of its own.
        let notForCompose: Set<String> = ["REDEEM_BUS_HOSTS_FILE"]
        var missing: [String] = []
        for (setting, services) in readers.sorted(by: { $0.key < $1.key }) where !notForCompose.contains(setting) {
            let forms: Set<String> =
                setting.hasSuffix("_FILE") ? [setting, String(setting.dropLast(5))] : [setting, setting + "_FILE"]
            for service in services.sorted() {
                let environment = config.services[service]?.environment ?? [:]
                if forms.isDisjoint(with: environment.keys) { missing.append("\(service): \(setting)") }
            }
        }
        #expect(missing == [], "settings docs/configuration.md lists that never reach the container")
    }

    /// Which services read each setting of docs/configuration.md (see the test above).
    static func readers(configuration doc: String) -> [String: Set<String>] {
        let services = ["accounts", "coupons", "grants", "gateway"]
        func matches(_ pattern: String, _ text: String) -> [[String]] {
            let regex = try! NSRegularExpression(pattern: pattern)
            return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).map { m in
                (0..<m.numberOfRanges).map { Range(m.range(at: $0), in: text).map { String(text[$0]) } ?? "" }
            }
        }
        func named(_ text: String) -> Set<String> {
            Set(services.filter { !matches("\\b\($0)\\b", text).isEmpty })
        }
        var result: [String: Set<String>] = [:]
        var section = "", readByColumn: Int?
        for line in doc.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("#") {
                section = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
                readByColumn = nil
                continue
            }
            let cells = line.trimmingCharacters(in: .whitespaces)
                .split(separator: "|", omittingEmptySubsequences: false)
                .dropFirst().dropLast().map { $0.trimmingCharacters(in: .whitespaces) }
            if line.hasPrefix("| variable") {
                readByColumn = cells.firstIndex(of: "read by")
                continue
            }
            guard line.hasPrefix("| `REDEEM_"), let first = cells.first else { continue }
            var owners = Set<String>(), perService = false
            if let column = readByColumn, column < cells.count {
                let readBy = cells[column]
                owners = readBy.contains("all four") ? Set(services) : named(readBy)
                perService = readBy.contains("that service")
            } else {
                let heading = section.split(separator: ":").first.map { $0.lowercased() } ?? ""
                guard services.contains(heading) else { continue }
                owners = [heading]
            }
            let meaning = cells.dropFirst().joined(separator: " ")
            for m in matches("the same setting ([a-z, ]+?) reads?\\b", meaning) { owners.formUnion(named(m[1])) }
            for m in matches("\\b([A-Za-z]+) reads it too", meaning) { owners.formUnion(named(m[1].lowercased())) }
            for m in matches("`(REDEEM_[A-Z0-9_<>]+)`", first) {
                let names =
                    m[1].contains("<NAME>")
                    ? services.prefix(3).map { m[1].replacingOccurrences(of: "<NAME>", with: $0.uppercased()) } : [m[1]]
                for name in names {
                    var who = owners
                    if perService { who.formUnion(services.filter { name.contains("_\($0.uppercased())_") }) }
                    result[name, default: []].formUnion(who)
                }
            }
        }
        return result
    }

    /// The Kubernetes tree (deploy/kubernetes) renders with kubectl's kustomize and validates offline
    /// against the Kubernetes 1.30 schemas (`kubernetes-validate --strict`, from PyPI: both installed by
    /// scripts/setup), and keeps the pod rules docs/kubernetes.md promises. The validator is shown to
    /// refuse a broken copy of the same render, so a pass means something.
    @Test func kubernetesManifestsAreValid() async throws {
        let found = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        let kubectl = try #require(found, "kubectl is installed by scripts/setup")
        let dir = try Project.temporaryDirectory("k8s")
        defer { try? FileManager.default.removeItem(at: dir) }
        /// Runs `python3 arguments` (python3 from PATH, where setup's pip installed the tools); answers
        /// its exit status and its output.
        func python(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            let out = dir.appendingPathComponent("out-\(UUID().uuidString)").path
            let p = try Subprocess("/usr/bin/env", ["python3"] + arguments, stdout: out, stderr: out)
            let status = try await offThePool { p.wait() }
            return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
        }
        func validate(_ yaml: String, _ name: String) async throws -> (status: Int32, output: String) {
            let file = dir.appendingPathComponent(name)
            try yaml.write(to: file, atomically: true, encoding: .utf8)
            return try await python(["-m", "kubernetes_validate", "-k", "1.30", "--strict", file.path])
        }

        let rendered = try await offThePool {
            try Subprocess.run(kubectl, ["kustomize", Project.root.appendingPathComponent("deploy/kubernetes").path])
        }
        let base = try await validate(rendered, "base.yaml")
        #expect(base.status == 0, "deploy/kubernetes validates: \(base.output)")
        #expect(!base.output.contains("ERROR") && !base.output.contains("WARN"), "\(base.output)")
        for resource in [
            "deployment/accounts", "deployment/coupons", "deployment/grants", "deployment/gateway",
            "service/accounts", "service/coupons", "service/grants", "service/gateway", "job/redeem-migrate",
            "horizontalpodautoscaler/gateway", "horizontalpodautoscaler/coupons", "poddisruptionbudget/coupons",
            "networkpolicy/redeem-default-deny"
        ] {
            #expect(base.output.contains("passed for resource \(resource) "), "\(resource) is rendered and valid")
        }
        // No Secret in the base, so no apply writes placeholders over real ones; every Secret its pods
        // name is one the example's make-secrets makes, with each key they read, and that validates.
        #expect(!base.output.contains("resource secret/"), "the base creates no Secret")
        let made = try await offThePool { try Self.exampleSecrets(kubectl: kubectl, in: dir) }
        let secrets = try await validate(made, "secrets.yaml")
        #expect(secrets.status == 0 && !secrets.output.contains("ERROR"), "make-secrets validates: \(secrets.output)")
        try made.write(to: dir.appendingPathComponent("secrets.yaml"), atomically: true, encoding: .utf8)
        let named = try await python([
            "-c", Self.secretRules, dir.appendingPathComponent("base.yaml").path,
            dir.appendingPathComponent("secrets.yaml").path
        ])
        #expect(named.status == 0 && named.output.contains("9 Secrets named, each made"), "\(named.output)")

        // A wrong type and an unknown field, each in an otherwise valid render: both refused.
        for (broken, change) in [
            ("containerPort: 7102", "containerPort: seven"),
            ("readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true")
        ] {
            #expect(rendered.contains(broken))
            let bad = try await validate(rendered.replacingOccurrences(of: broken, with: change), "broken.yaml")
            #expect(bad.status != 0 && bad.output.contains("ERROR"), "\(change) is refused: \(bad.output)")
        }

        // The rules every pod keeps (PyYAML comes with kubernetes-validate).
        let rules = try await python(["-c", Self.podRules, dir.appendingPathComponent("base.yaml").path])
        #expect(rules.status == 0, "\(rules.output)")
        #expect(rules.output.contains("checked 5 pod templates"), "\(rules.output)")
        let hook = try await python(["-c", Self.hookRules, dir.appendingPathComponent("base.yaml").path])
        #expect(hook.status == 0 && hook.output.contains("the migration Job is a hook"), "\(hook.output)")
        let egress = try await python(["-c", Self.egressRules, dir.appendingPathComponent("base.yaml").path])
        #expect(egress.status == 0 && egress.output.contains("egress as needed"), "\(egress.output)")

        // The example overlay needs a kustomize with `patches` (v4 and later: kubectl 1.21 and later).
        let version = (try? await offThePool { try Subprocess.run(kubectl, ["version", "--client"]) }) ?? ""
        if let major = version.firstMatch(of: /Kustomize Version: v(\d+)/).flatMap({ Int($0.1) }), major >= 4 {
            let example = try await offThePool {
                try Subprocess.run(
                    kubectl, ["kustomize", Project.root.appendingPathComponent("deploy/kubernetes-example").path])
            }
            let overlay = try await validate(example, "example.yaml")
            #expect(
                overlay.status == 0 && !overlay.output.contains("ERROR"),
                "deploy/kubernetes-example validates: \(overlay.output)")
            #expect(example.contains("namespace: redeem") && !example.contains("image: redeem:local"))
            // The example's gateway trusts its ingress controller to name the client.
            let gateway = try #require(
                example.components(separatedBy: "\n---\n").first {
                    $0.contains("kind: Deployment") && $0.contains("name: gateway\n")
                })
            #expect(gateway.contains("name: REDEEM_TRUSTED_PROXIES"), "the example sets the ingress as trusted proxy")
            let ingress = overlay.output.contains("passed for resource ingress/gateway ")
            #expect(ingress, "the example's Ingress: \(overlay.output)")
            #expect(!example.contains("kind: Secret"), "the example creates no Secret either")
        }
    }

    /// The monitoring pack (deploy/kubernetes/monitoring) renders with kustomize; its Kubernetes
    /// kinds validate like the base, and its PodMonitor, PrometheusRule and dashboard (CRDs and JSON
    /// with no bundled schema) are checked by structure: the PodMonitor scrapes the port each
    /// Deployment of the base serves /metrics on, every issue-named alert is there with a severity and
    /// a summary, and every metric an alert or a panel names is one the code defines. A render with a
    /// metric renamed is refused, so a rename in the code fails this test.
    @Test func monitoringPackIsValid() async throws {
        let found = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
        let kubectl = try #require(found, "kubectl is installed by scripts/setup")
        let dir = try Project.temporaryDirectory("monitoring")
        defer { try? FileManager.default.removeItem(at: dir) }
        func python(_ arguments: [String]) async throws -> (status: Int32, output: String) {
            let out = dir.appendingPathComponent("out-\(UUID().uuidString)").path
            let p = try Subprocess("/usr/bin/env", ["python3"] + arguments, stdout: out, stderr: out)
            let status = try await offThePool { p.wait() }
            return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
        }
        func render(_ path: String, _ name: String) async throws -> URL {
            let yaml = try await offThePool {
                try Subprocess.run(kubectl, ["kustomize", Project.root.appendingPathComponent(path).path])
            }
            let file = dir.appendingPathComponent(name)
            try yaml.write(to: file, atomically: true, encoding: .utf8)
            return file
        }
        let pack = try await render("deploy/kubernetes/monitoring", "monitoring.yaml")
        let base = try await render("deploy/kubernetes", "base.yaml")

        let validated = try await python(["-m", "kubernetes_validate", "-k", "1.30", "--strict", pack.path])
        #expect(validated.status == 0 && !validated.output.contains("ERROR"), "\(validated.output)")
        for resource in ["configmap/redeem-grafana-dashboard", "networkpolicy/redeem-metrics-scrape"] {
            #expect(validated.output.contains("passed for resource \(resource) "), "\(resource): \(validated.output)")
        }
        let warnings = validated.output.split(separator: "\n").filter { $0.hasPrefix("WARN") }
        #expect(warnings.count == 2, "\(validated.output)")
        for warning in warnings {
            #expect(
                warning.contains("kind PodMonitor with api version monitoring.coreos.com/v1")
                    || warning.contains("kind PrometheusRule with api version monitoring.coreos.com/v1"),
                "only the two CRDs go without a schema: \(warning)")
        }

        let defined = try Self.definedMetrics()
        let metrics = dir.appendingPathComponent("metrics.txt")
        try defined.sorted().joined(separator: "\n").write(to: metrics, atomically: true, encoding: .utf8)
        let checked = try await python(["-c", Self.monitoringRules, pack.path, base.path, metrics.path])
        #expect(checked.status == 0, "\(checked.output)")
        #expect(checked.output.contains("9 alerts and 19 panels name only defined metrics"), "\(checked.output)")

        // A metric renamed (here in the rules, as a rename in the code would leave them) is refused.
        let renamed = dir.appendingPathComponent("renamed.yaml")
        try String(contentsOf: pack, encoding: .utf8).replacingOccurrences(
            of: "redeem_outbox_depth", with: "redeem_outbox_size"
        ).write(to: renamed, atomically: true, encoding: .utf8)
        let refused = try await python(["-c", Self.monitoringRules, renamed.path, base.path, metrics.path])
        #expect(refused.status != 0 && refused.output.contains("redeem_outbox_size"), "\(refused.output)")
    }

    /// Metric names the services define: every `redeem_…` and `process_…` name in a string literal of
    /// Sources/ and Services/. The names the metrics work of the same issue adds on another branch
    /// (`pending`) count as defined while the code holds none of them; once it holds one, each must be
    /// there, so a rename then fails too.
    static func definedMetrics() throws -> Set<String> {
        let pending: Set = [
            "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
            "process_start_time_seconds", "redeem_build_info", "redeem_redemptions_total", "redeem_store_offers",
            "redeem_dependency_requests_total", "redeem_dependency_request_duration_seconds"
        ]
        let literal = try NSRegularExpression(pattern: #""[^"\n]*""#)
        let name = try NSRegularExpression(pattern: #"\b((?:redeem|process)_[a-z0-9_]+)\b"#)
        var defined: Set<String> = []
        for folder in ["Sources", "Services"] {
            let root = Project.root.appendingPathComponent(folder)
            let files = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String } ?? []
            for file in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                for l in literal.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                    let part = String(text[Range(l.range, in: text)!])
                    for m in name.matches(in: part, range: NSRange(part.startIndex..., in: part)) {
                        defined.insert(String(part[Range(m.range(at: 1), in: part)!]))
                    }
                }
            }
        }
        #expect(defined.isSuperset(of: ["redeem_outbox_depth", "redeem_grants_total", "redeem_http_requests_total"]))
        return defined.isDisjoint(with: pending) ? defined.union(pending) : defined
    }

    /// argv: the pack's render, the base's render, the defined metric names (a file, one a line).
    static let monitoringRules = #"""
        import sys, yaml, json, re
        docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
        base = [d for d in yaml.safe_load_all(open(sys.argv[2])) if d]
        defined = set(open(sys.argv[3]).read().split())
        problems = []
        kinds = {d["kind"]: d for d in docs}
        for kind in ("PodMonitor", "PrometheusRule", "ConfigMap", "NetworkPolicy"):
            if kind not in kinds: problems.append(f"no {kind}")
        KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset"}
        # Aggregations may take `by (…)` before their argument: `sum by (le) (…)`.
        KEYWORDS |= {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values"}
        def metrics(expr):
            e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # label values
            e = re.sub(r"\{[^{}]*\}", "", e)                        # selectors
            e = re.sub(r"\[[^\[\]]*\]", "", e)                      # ranges, subqueries
            e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", r"\1", e)
            names = set()
            for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][\w:]*)\s*(\()?", e):
                word, call = m.group(1), m.group(2)
                if call or word in KEYWORDS: continue
                names.add(word)
            return names
        def known(name):
            if name in defined or name == "up": return True
            return any(name.endswith(s) and name[: -len(s)] in defined for s in ("_bucket", "_sum", "_count"))
        def check(where, expr):
            if not isinstance(expr, str) or not expr.strip(): problems.append(f"{where}: no expression"); return
            if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"): problems.append(f"{where}: unbalanced")
            names = metrics(expr)
            if not names: problems.append(f"{where}: names no metric")
            for n in sorted(names):
                if not known(n): problems.append(f"{where}: {n} is no metric the code defines")

        # PodMonitor: each Deployment's pods, on the port its readiness probe uses (/metrics is there).
        pm = kinds.get("PodMonitor", {})
        if pm.get("apiVersion") != "monitoring.coreos.com/v1": problems.append("PodMonitor: apiVersion")
        spec = pm.get("spec", {})
        ports = {e.get("port") for e in spec.get("podMetricsEndpoints", [])}
        if any(e.get("path") != "/metrics" for e in spec.get("podMetricsEndpoints", [])): problems.append("PodMonitor: a path other than /metrics")
        sel = spec.get("selector", {})
        apps = next((x["values"] for x in sel.get("matchExpressions", []) if x["key"] == "app.kubernetes.io/name" and x["operator"] == "In"), [])
        if sel.get("matchLabels", {}).get("app.kubernetes.io/part-of") != "redeem": problems.append("PodMonitor: selects other than Redeem's pods")
        for d in base:
            if d["kind"] != "Deployment": continue
            name, c = d["metadata"]["name"], d["spec"]["template"]["spec"]["containers"][0]
            port = c["readinessProbe"]["httpGet"]["port"]
            if port not in ports: problems.append(f"PodMonitor: {name}'s port {port} is not scraped")
            if name not in apps: problems.append(f"PodMonitor: {name} not selected")
        if "redeem-migrate" in apps: problems.append("PodMonitor: selects the Job")

        # PrometheusRule: groups of rules, each alert with an expression, a severity and a summary.
        pr = kinds.get("PrometheusRule", {})
        if pr.get("apiVersion") != "monitoring.coreos.com/v1": problems.append("PrometheusRule: apiVersion")
        groups = pr.get("spec", {}).get("groups") or []
        if len({g.get("name") for g in groups}) != len(groups): problems.append("PrometheusRule: group names repeat")
        alerts = []
        for g in groups:
            if not g.get("rules"): problems.append(f"group {g.get('name')}: no rules")
            for r in g.get("rules", []):
                name = r.get("alert") or r.get("record")
                if not name: problems.append(f"group {g.get('name')}: a rule without alert or record"); continue
                alerts.append(name)
                check(name, r.get("expr"))
                if "for" in r and not re.fullmatch(r"\d+[smh]", str(r["for"])): problems.append(f"{name}: for {r['for']}")
                if "alert" in r:
                    if r.get("labels", {}).get("severity") not in ("warning", "critical"): problems.append(f"{name}: severity")
                    if not r.get("annotations", {}).get("summary"): problems.append(f"{name}: no summary")
        for wanted in ("RedeemGrantBacklogAging", "RedeemWebhookFailureRate", "RedeemStoreOfferFailures", "RedeemHTTP5xxRate", "RedeemHTTPLatencyP99"):
            if wanted not in alerts: problems.append(f"no alert {wanted}")
        if len(set(alerts)) != len(alerts): problems.append("alert names repeat")

        # The dashboard: a ConfigMap Grafana's sidecar loads, holding a dashboard whose every panel
        # queries defined metrics.
        cm = kinds.get("ConfigMap", {})
        if cm.get("metadata", {}).get("labels", {}).get("grafana_dashboard") != "1": problems.append("dashboard: no grafana_dashboard label")
        panels = 0
        for key, text in cm.get("data", {}).items():
            dash = json.loads(text)
            if not dash.get("uid") or not dash.get("title"): problems.append(f"{key}: no uid or title")
            def walk(ps):
                global panels
                for p in ps:
                    if p.get("type") == "row": walk(p.get("panels", [])); continue
                    panels += 1
                    if not p.get("targets"): problems.append(f"{key}: panel {p.get('title')} has no query")
                    for t in p.get("targets", []): check(f"{key}: {p.get('title')}", t.get("expr"))
            walk(dash.get("panels", []))
        print("\n".join(problems) or f"{sum(1 for a in alerts)} alerts and {panels} panels name only defined metrics")
        sys.exit(1 if problems else 0)
        """#

    /// Runs `deploy/kubernetes-example/make-secrets` on made-up inputs (no cluster: kubectl's
    /// client-side dry run) and answers the YAML it prints.
    static func exampleSecrets(kubectl: String, in dir: URL) throws -> String {
        let db = dir.appendingPathComponent("redeem-db")
        try FileManager.default.createDirectory(at: db, withIntermediateDirectories: true)
        for service in ["accounts", "coupons", "grants"] {
            let roles = [("\(service).url", "redeem_\(service)"), ("\(service)-owner.url", "redeem_\(service)_owner")]
            for (file, role) in roles {
                try "postgresql://\(role):pw@db.internal:5432/redeem\n".write(
                    to: db.appendingPathComponent(file), atomically: true, encoding: .utf8)
            }
        }
        let keys = ["ACCOUNTS", "COUPONS", "GRANTS", "GATEWAY"].map { "BUS_SECRET_KEY_\($0)='made-up'" }
        let bus = dir.appendingPathComponent("bus-keys.env")
        try (keys + ["BUS_PUBLIC_KEYS='accounts=a,coupons=c,grants=g,gateway=w'"]).joined(separator: "\n")
            .write(to: bus, atomically: true, encoding: .utf8)
        return try Subprocess.run(
            Project.root.appendingPathComponent("deploy/kubernetes-example/make-secrets").path, [db.path, bus.path],
            environment: [
                "PATH": "/usr/bin:/bin", "KUBECTL": kubectl, "REDEEM_SECRET_KEY": "made-up",
                "REDEEM_ADMIN_DATABASE_URL": "postgresql://admin:pw@db.internal:5432/redeem"
            ])
    }

    /// Every Secret a pod template of the render (argv[1]) names, by `envFrom` or `secretKeyRef`, is
    /// one of the Secrets in argv[2], holding each key named; and no reference is optional (a
    /// missing Secret keeps the pod from starting rather than run it without).
    static let secretRules = #"""
        import sys, yaml
        docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
        made = {d["metadata"]["name"]: set(d.get("data", {})) | set(d.get("stringData", {})) for d in yaml.safe_load_all(open(sys.argv[2])) if d and d["kind"] == "Secret"}
        named, problems = set(), []
        for d in docs:
            if d["kind"] not in ("Deployment", "Job"): continue
            pod = d["spec"]["template"]["spec"]
            for c in pod.get("initContainers", []) + pod["containers"]:
                for ref in c.get("envFrom", []):
                    if "secretRef" not in ref: continue
                    name = ref["secretRef"]["name"]; named.add(name)
                    if ref["secretRef"].get("optional"): problems.append(f"{d['metadata']['name']}: {name} optional")
                    if name not in made: problems.append(f"{d['metadata']['name']}: {name} is not made")
                for e in c.get("env", []):
                    key = e.get("valueFrom", {}).get("secretKeyRef")
                    if not key: continue
                    named.add(key["name"])
                    if key["key"] not in made.get(key["name"], set()): problems.append(f"{d['metadata']['name']}: {key['name']}/{key['key']} is not made")
        print("\n".join(problems) or f"{len(named)} Secrets named, each made")
        sys.exit(1 if problems else 0)
        """#

    /// The migration Job runs before a sync under Argo CD (a PreSync hook, replaced each sync), may be
    /// replaced by Flux, and is removed a while after it finishes.
    static let hookRules = #"""
        import sys, yaml
        job = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "Job")
        a, problems = job["metadata"].get("annotations", {}), []
        if a.get("argocd.argoproj.io/hook") != "PreSync": problems.append("no Argo CD PreSync hook")
        if a.get("argocd.argoproj.io/hook-delete-policy") != "BeforeHookCreation": problems.append("no hook-delete-policy")
        if a.get("kustomize.toolkit.fluxcd.io/force") != "enabled": problems.append("Flux cannot replace it")
        if not 0 < job["spec"].get("ttlSecondsAfterFinished", 0) <= 7 * 86400: problems.append("no ttlSecondsAfterFinished")
        print("\n".join(problems) or "the migration Job is a hook")
        sys.exit(1 if problems else 0)
        """#

    /// Checks every pod template of a rendered tree: no service account token, non-root, a
    /// read-only root filesystem, no capabilities, memory limits; the services' probes on
    /// /healthz and /readyz; the migration Job makes the database roles first, and then runs
    /// `migrate`; no other pod reads the administrator's database URL.
    static let podRules = #"""
        import sys, yaml
        docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
        pods = [(d["kind"], d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in docs if d["kind"] in ("Deployment", "Job")]
        problems = []
        for kind, name, pod in pods:
            where = f"{kind}/{name}"
            if pod.get("automountServiceAccountToken") is not False: problems.append(f"{where}: service account token mounted")
            if pod.get("securityContext", {}).get("runAsNonRoot") is not True: problems.append(f"{where}: may run as root")
            for c in pod.get("initContainers", []) + pod["containers"]:
                sc = c.get("securityContext", {})
                if sc.get("readOnlyRootFilesystem") is not True: problems.append(f"{where}/{c['name']}: writable root")
                if sc.get("allowPrivilegeEscalation") is not False: problems.append(f"{where}/{c['name']}: privilege escalation")
                if sc.get("capabilities", {}).get("drop") != ["ALL"]: problems.append(f"{where}/{c['name']}: capabilities kept")
                if "memory" not in c.get("resources", {}).get("limits", {}): problems.append(f"{where}/{c['name']}: no memory limit")
                if kind == "Deployment":
                    if c.get("livenessProbe", {}).get("httpGet", {}).get("path") != "/healthz": problems.append(f"{where}: liveness not /healthz")
                    if c.get("readinessProbe", {}).get("httpGet", {}).get("path") != "/readyz": problems.append(f"{where}: readiness not /readyz")
                if kind == "Job" and c in pod["containers"] and c.get("command", [])[-1:] != ["migrate"]: problems.append(f"{where}/{c['name']}: does not migrate")
            # The migration Job makes the database roles first, and only it reads the administrator's URL.
            secrets = {ref["secretRef"]["name"] for c in pod.get("initContainers", []) + pod["containers"] for ref in c.get("envFrom", []) if "secretRef" in ref}
            if kind == "Job":
                first = (pod.get("initContainers") or [{}])[0]
                if first.get("command") != ["/usr/local/lib/redeem/database-roles", "--from-env"]: problems.append(f"{where}: does not make the roles first")
                if {r["secretRef"]["name"] for r in first.get("envFrom", []) if "secretRef" in r} != {"redeem-database-admin", "redeem-database"}: problems.append(f"{where}: roles without their Secrets")
            elif "redeem-database-admin" in secrets: problems.append(f"{where}: reads the administrator's URL")
        print("\n".join(problems) or f"checked {len(pods)} pod templates")
        sys.exit(1 if problems else 0)
        """#

    /// The egress the services need, and only they, to public addresses (NetworkPolicies add up):
    /// accounts SMTP (587, 465) and HTTPS (Apple's sign-in), grants HTTPS (RevenueCat, Apple's and
    /// Google's store APIs), the gateway HTTPS (Google's keys for Play pushes); coupons none.
    static let egressRules = #"""
        import sys, yaml
        docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
        policies = [d["spec"] for d in docs if d["kind"] == "NetworkPolicy"]
        def selects(spec, app):
            sel = spec["podSelector"]
            labels = sel.get("matchLabels", {})
            if labels.get("app.kubernetes.io/part-of") != "redeem" or "redeem.dev/database" in labels: return False
            if labels.get("app.kubernetes.io/name", app) != app: return False
            return all(app in e["values"] for e in sel.get("matchExpressions", []) if e["key"] == "app.kubernetes.io/name" and e["operator"] == "In")
        def public(port, app):
            for spec in policies:
                if not selects(spec, app): continue
                for rule in spec.get("egress", []):
                    if port in [p["port"] for p in rule.get("ports", [])] and any(b.get("ipBlock", {}).get("cidr") == "0.0.0.0/0" for b in rule.get("to", [])):
                        return True
            return False
        problems = [f"{app} cannot reach port {port}" for app, port in [("accounts", 587), ("accounts", 465), ("accounts", 443), ("grants", 443), ("gateway", 443)] if not public(port, app)]
        problems += [f"{app} may reach port {port}" for app, port in [("coupons", 443), ("coupons", 587), ("gateway", 587), ("grants", 587)] if public(port, app)]
        print("\n".join(problems) or "egress as needed")
        sys.exit(1 if problems else 0)
        """#

    /// docs/configuration.md lists every environment variable the code reads, and nothing else: the
    /// Swift sources' `REDEEM_…` names, and what the stack runner and scripts read (`$REDEEM_…`,
    /// `${REDEEM_…}`, or a name handed to the runner's port helpers). A name built per service
    /// (`REDEEM_\(service)_EVENTS`) is documented by at least one service's form or by `<NAME>`.
    @Test func theConfigurationDocumentListsExactlyTheVariablesTheCodeReads() throws {
        let root = Project.root
        func text(_ path: String) throws -> String {
            try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        }
        func names(_ pattern: String, in text: String) throws -> Set<String> {
            let regex = try NSRegularExpression(pattern: pattern)
            return Set(
                regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap {
                    Range($0.range(at: 1), in: text).map { String(text[$0]) }
                })
        }
        let services = ["ACCOUNTS", "COUPONS", "GRANTS"]
        var read: Set<String> = [], perService: Set<String> = []
        for folder in ["Sources", "Services", "Clients"] {
            let files =
                FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path)?.compactMap {
                    $0 as? String
                } ?? []
            for file in files where file.hasSuffix(".swift") {
                let swift = try text("\(folder)/\(file)")
                read.formUnion(try names(#""(REDEEM_[A-Z0-9_]+)""#, in: swift))
                perService.formUnion(try names(#""REDEEM_\\\([a-z.()]+\)(_[A-Z0-9_]+)""#, in: swift))
            }
        }
        for script in [
            "deploy/run-stack", "deploy/postgres", "deploy/database-roles", "scripts/setup", "scripts/test",
            "scripts/env.sh", "scripts/free-port", "scripts/link-order", "deploy/images", "docker-compose.yml",
            "docker-compose.stores.yml"
        ] {
            let shell = try text(script)
            read.formUnion(try names(#"\$\{?(REDEEM_[A-Z0-9_]+)"#, in: shell))
            read.formUnion(try names(#"(?:port_or_free|bus) (REDEEM_[A-Z0-9_]+)"#, in: shell))
            read.formUnion(try names(#"environ(?:ment)?\.get\("(REDEEM_[A-Z0-9_]+)""#, in: shell))
        }
        let doc = try text("docs/configuration.md")
        var documented = try names(#"`(REDEEM_[A-Z0-9_]+)`"#, in: doc)
        for suffix in try names(#"`REDEEM_<NAME>(_[A-Z0-9_]+)`"#, in: doc) {
            documented.formUnion(services.map { "REDEEM_\($0)\(suffix)" })
        }
        let forms = { (suffix: String) in Set(services.map { "REDEEM_\($0)\(suffix)" }) }
        #expect(
            read.count > 40 && perService.count >= 3,
            "the scan finds the variables (\(read.count), \(perService.count) per service)")
        #expect(read.subtracting(documented).sorted() == [], "read by the code but not in docs/configuration.md")
        #expect(
            perService.filter { forms($0).isDisjoint(with: documented) }.sorted() == [],
            "built per service but documented for none")
        let explained = read.union(perService.flatMap(forms))
        #expect(documented.subtracting(explained).sorted() == [], "in docs/configuration.md but read by no code")
    }

    /// RedeemKit can be a dependency of an iOS app: the manifest dumps, declares iOS 16,
    /// and RedeemKit's target depends on nothing (no layer, no system library); its own package
    /// (Clients/RedeemKit) declares iOS 16 and macOS 13 and builds the same sources; a consumer
    /// package whose manifest declares `.iOS(.v16)` and depends on that package's RedeemKit product
    /// resolves and dumps. (Building for iOS needs Apple's SDK, which Linux has not.)
    @Test func redeemKitResolvesAsADependencyOfAnIOSPackage() async throws {
        let swift = try #require(
            ["/opt/swift/usr/bin/swift", "/usr/bin/swift", "/usr/local/bin/swift"]
                .first { FileManager.default.isExecutableFile(atPath: $0) } ?? Self.onPath("swift"), "swift is on PATH")
        let dir = try Project.temporaryDirectory("consumer")
        defer { try? FileManager.default.removeItem(at: dir) }
        // A scratch path of its own: the running `swift test` holds the package's .build.
        let dumped = try await offThePool {
            try Subprocess.run(
                swift,
                [
                    "package", "--package-path", Project.root.path, "--scratch-path",
                    dir.appendingPathComponent("root-build").path,
                    "dump-package"
                ])
        }
        /// `swift package dump-package`, as far as this test reads it.
        struct Manifest: Decodable {
            struct Platform: Decodable {
                let platformName: String
                let version: String
            }
            struct Target: Decodable {
                /// A dependency of any kind (only their number is read).
                struct Dependency: Decodable { init(from decoder: any Decoder) throws {} }
                let name: String
                let path: String?
                let dependencies: [Dependency]
            }
            struct Product: Decodable {
                let name: String
                let targets: [String]
            }
            let platforms: [Platform]
            let targets: [Target]
            let products: [Product]
        }
        let manifest = try JSONDecoder().decode(Manifest.self, from: Data(dumped.utf8))
        #expect(
            manifest.platforms.contains { $0.platformName == "ios" && $0.version == "16.0" }, "\(manifest.platforms)")
        let kit = try #require(manifest.targets.first { $0.name == "RedeemKit" })
        #expect(kit.dependencies.isEmpty, "RedeemKit depends on nothing but the toolchain")
        #expect(kit.path == "Clients/RedeemKit/Sources/RedeemKit")
        #expect(manifest.products.contains { $0.name == "RedeemKit" && $0.targets == ["RedeemKit"] })
        // RedeemKit imports only Foundation (and Apple's frameworks behind canImport).
        let sources = Project.root.appendingPathComponent("Clients/RedeemKit/Sources/RedeemKit")
        for file in try FileManager.default.contentsOfDirectory(atPath: sources.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            let imports = text.split(separator: "\n").filter { $0.hasPrefix("import ") }.map { String($0.dropFirst(7)) }
            let allowed: Set = [
                "Foundation", "FoundationNetworking", "Security", "StoreKit", "UIKit", "AppKit", "CloudKit"
            ]
            #expect(Set(imports).isSubset(of: allowed), "\(file): \(imports)")
        }

        // Its own package: what an app depends on, without the server's package.
        let own = try await offThePool {
            try Subprocess.run(
                swift,
                [
                    "package", "--package-path", Project.root.appendingPathComponent("Clients/RedeemKit").path,
                    "--scratch-path", dir.appendingPathComponent("kit-build").path, "dump-package"
                ])
        }
        let ownManifest = try JSONDecoder().decode(Manifest.self, from: Data(own.utf8))
        #expect(Set(ownManifest.platforms.map { "\($0.platformName) \($0.version)" }) == ["ios 16.0", "macos 13.0"])
        #expect(ownManifest.products.contains { $0.name == "RedeemKit" && $0.targets == ["RedeemKit"] })
        let ownKit = try #require(ownManifest.targets.first { $0.name == "RedeemKit" })
        #expect(ownKit.dependencies.isEmpty && [nil, "Sources/RedeemKit"].contains(ownKit.path))

        let consumer = dir.appendingPathComponent("Consumer")
        try FileManager.default.createDirectory(
            at: consumer.appendingPathComponent("Sources/ConsumerApp"), withIntermediateDirectories: true)
        try """
        // swift-tools-version:6.0
        import PackageDescription

        let package = Package(
            name: "Consumer",
            platforms: [.iOS(.v16)],
            dependencies: [.package(path: "\(Project.root.path)/Clients/RedeemKit")],
            targets: [.target(name: "ConsumerApp", dependencies: [.product(name: "RedeemKit", package: "RedeemKit")])]
        )
        """.write(to: consumer.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try """
        import RedeemKit
        public let client = RedeemClient(baseURL: URL(string: "https://redeem.example.com")!)
        """.write(
            to: consumer.appendingPathComponent("Sources/ConsumerApp/App.swift"), atomically: true, encoding: .utf8)
        let scratch = dir.appendingPathComponent("consumer-build").path
        _ = try await offThePool {
            try Subprocess.run(
                swift, ["package", "--package-path", consumer.path, "--scratch-path", scratch, "resolve"])
        }
        let consumerManifest = try await offThePool {
            try Subprocess.run(
                swift, ["package", "--package-path", consumer.path, "--scratch-path", scratch, "dump-package"])
        }
        #expect(consumerManifest.contains("\"RedeemKit\""))
        let graph = try await offThePool {
            try Subprocess.run(
                swift,
                [
                    "package", "--package-path", consumer.path, "--scratch-path", scratch, "show-dependencies",
                    "--format", "json"
                ])
        }
        #expect(graph.contains(Project.root.path + "/Clients/RedeemKit"), "\(graph)")
    }

    static func onPath(_ name: String) -> String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The repository tracks sources, not local state: nothing `.gitignore` ignores is tracked (a
    /// committed virtualenv or `__pycache__` once was), and no tracked file is over 1 MB unless
    /// `.gitattributes` marks it generated (`linguist-generated`).
    @Test func theRepositoryTracksNothingIgnoredAndNoLargeHandWrittenFile() async throws {
        let root = Project.root.path
        let git = ["/usr/bin/git", "/usr/local/bin/git"].first { FileManager.default.isExecutableFile(atPath: $0) }
        let path = try #require(git)
        let ignored = try await offThePool {
            try Subprocess.run(path, ["-C", root, "ls-files", "--cached", "--ignored", "--exclude-standard"])
        }
        #expect(ignored.isEmpty, "tracked but ignored: \(ignored.split(separator: "\n").prefix(10))")

        let files = try await offThePool { try Subprocess.run(path, ["-C", root, "ls-files", "-z"]) }
            .split(separator: "\0").map(String.init)
        let large = files.filter { file in
            let size = (try? FileManager.default.attributesOfItem(atPath: "\(root)/\(file)")[.size] as? Int) ?? 0
            return size > 1_000_000
        }
        if !large.isEmpty {
            let attributes = try await offThePool {
                try Subprocess.run(path, ["-C", root, "check-attr", "linguist-generated", "--"] + large)
            }
            for file in large {
                #expect(
                    attributes.contains("\(file): linguist-generated: set"),
                    "\(file) is over 1 MB and not marked generated")
            }
        }
        // A bound far above the ~710 source files of today and far below what a committed
        // virtualenv or build folder adds (thousands): it catches those, not growth.
        #expect(files.count < 1_000, "\(files.count) tracked files")
    }

    /// Each service imports only the layers `Package.swift` lists for it (`serviceLayers`), besides
    /// the toolchain's own modules and its own library: the gateway, say, cannot reach the database.
    @Test func eachServiceImportsOnlyItsListedLayers() throws {
        let root = Project.root
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let table = try #require(
            manifest.firstMatch(of: /let serviceLayers: \[String: \[String\]\] = \[(?<body>[^;]*?)\n\]/)
        ).output.body
        var allowed: [String: Set<String>] = [:]
        for line in table.split(separator: "\n") {
            guard let m = line.firstMatch(of: /"(?<service>\w+)": \[(?<layers>[^\]]*)\]/) else { continue }
            allowed[String(m.output.service)] = Set(
                m.output.layers.split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                })
        }
        #expect(Set(allowed.keys) == ["accounts", "coupons", "grants", "gateway"], "\(allowed.keys)")
        let toolchain: Set<String> = [
            "Foundation", "FoundationNetworking", "FoundationEssentials", "Synchronization", "Glibc", "Dispatch"
        ]
        let importLine = /^(?:@testable |internal |public |@_implementationOnly )?import (?<module>\w+)/
        for (service, layers) in allowed {
            let dir = root.appendingPathComponent("Services/\(service)")
            let files =
                FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String }.filter {
                    $0.hasSuffix(".swift")
                } ?? []
            #expect(!files.isEmpty, "\(service) has sources")
            let library = service.prefix(1).uppercased() + service.dropFirst() + "Service"
            for file in files {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    guard let m = line.firstMatch(of: importLine) else { continue }
                    let module = String(m.output.module)
                    #expect(
                        toolchain.contains(module) || layers.contains(module) || module == library,
                        "Services/\(service)/\(file) imports \(module), which Package.swift does not list for \(service)"
                    )
                }
            }
        }
        #expect(!(allowed["gateway"] ?? []).contains("Database"), "the gateway holds no database")
    }

    /// libcurl is reached through the `Outbound` layer only: no other Swift file imports `CCurl`,
    /// no service lists it as a layer of its own, and the FoundationNetworking sessions that call
    /// outside APIs (on the same libcurl) are made there too (`URLSession.outbound`).
    @Test func onlyOutboundImportsLibcurl() throws {
        let root = Project.root
        var importers: [String] = []
        var sessionMakers: [String] = []
        for folder in ["Sources", "Services", "Clients"] {
            let dir = root.appendingPathComponent(folder)
            let files = (FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String } ?? [])
                .filter { $0.hasSuffix(".swift") }
            for file in files {
                let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
                if text.contains(/(?m)^(?:internal |public |@_implementationOnly )?import CCurl$/) {
                    importers.append("\(folder)/\(file)")
                }
                // The clients are apps' libraries: their sessions are the app's, not the server's.
                if folder != "Clients", text.contains("URLSession(configuration:") {
                    sessionMakers.append("\(folder)/\(file)")
                }
            }
        }
        #expect(
            !importers.isEmpty && importers.allSatisfy { $0.hasPrefix("Sources/Shared/Outbound/") }, "\(importers)")
        #expect(sessionMakers == ["Sources/Shared/Outbound/OutboundSession.swift"], "\(sessionMakers)")
        let manifest = try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
        let layers = /let serviceLayers: \[String: \[String\]\] = \[(?<body>[^;]*?)\n\]/
        let table = try #require(manifest.firstMatch(of: layers)).output.body
        #expect(!table.contains("\"CCurl\""), "a service lists CCurl itself")
    }

    /// `scripts/format-check` (run by `scripts/test`) passes on the tree: no Swift line changed since
    /// `.swift-format-baseline` is over 120 characters or against `.swift-format`'s rules. The same
    /// check refuses a planted line of 121 characters, so a pass means something.
    @Test func swiftFormatHoldsOnNewAndTouchedLines() async throws {
        let root = Project.root
        let check = root.appendingPathComponent("scripts/format-check").path
        let clean = try await offThePool {
            try Subprocess("/bin/bash", [check], stdout: "/dev/null", stderr: "/dev/null").wait()
        }
        #expect(clean == 0, "scripts/format-check finds lines to fix: run it to see them")

        let format = root.appendingPathComponent(".swift-format").path
        let dir = try Project.temporaryDirectory("format")
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("Planted.swift")
        try ("let planted = \"" + String(repeating: "x", count: 105) + "\"\n").write(
            to: file, atomically: true, encoding: .utf8)
        let tool = try #require(
            ["/opt/swift/usr/bin/swift-format", "/usr/bin/swift-format"].first {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        let out = dir.appendingPathComponent("out").path
        _ = try await offThePool {
            try Subprocess(tool, ["lint", "--configuration", format, file.path], stdout: out, stderr: out).wait()
        }
        let findings = try String(contentsOfFile: out, encoding: .utf8)
        #expect(findings.contains("[LineLength]"), "a line of 121 characters is refused: \(findings)")
    }

    @Test func ciRunsTheREADMETestCommand() throws {
        let readme = try String(contentsOf: Project.root.appendingPathComponent("README.md"), encoding: .utf8)
        let ci = try String(contentsOf: Project.root.appendingPathComponent(".ci/run"), encoding: .utf8)
        #expect(readme.contains("./scripts/test"))
        #expect(ci.contains("./scripts/test"))
    }
}
