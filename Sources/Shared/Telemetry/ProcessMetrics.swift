import Core
import Foundation
import Glibc

/// The process metrics Prometheus's client libraries export on Linux (`process_*`, read from
/// /proc at each scrape), and `redeem_build_info`.
public enum ProcessMetrics {
    public static func register(on registry: MetricsRegistry, service: String) {
        registry.setGauge(
            "redeem_build_info", help: "The build running: 1, labelled by service and version.",
            labels: ["service": service, "version": Build.version], 1)
        registry.counter("process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.") {
            read().map { [([:], $0.cpuSeconds)] } ?? []
        }
        registry.gauge("process_resident_memory_bytes", help: "Resident memory size in bytes.") {
            read().map { [([:], $0.residentBytes)] } ?? []
        }
        registry.gauge("process_virtual_memory_bytes", help: "Virtual memory size in bytes.") {
            read().map { [([:], $0.virtualBytes)] } ?? []
        }
        registry.gauge("process_start_time_seconds", help: "Start time of the process since unix epoch in seconds.") {
            read().map { [([:], $0.startTime)] } ?? []
        }
        registry.gauge("process_open_fds", help: "Number of open file descriptors.") {
            openDescriptors().map { [([:], Double($0))] } ?? []
        }
        registry.gauge("process_max_fds", help: "Maximum number of open file descriptors.") {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return [] }
            return [([:], Double(limit.rlim_cur))]
        }
    }

    struct Reading: Equatable {
        var cpuSeconds: Double, residentBytes: Double, virtualBytes: Double, startTime: Double
    }

    /// /proc/self/stat (proc(5)): utime and stime (fields 14 and 15) and starttime (22), in clock
    /// ticks, the last since boot (`btime` of /proc/stat); vsize (23) in bytes and rss (24) in pages.
    static func read() -> Reading? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let boot = bootTime()
        else { return nil }
        return parse(
            stat: stat, bootTime: boot, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))),
            pageSize: Double(sysconf(Int32(_SC_PAGESIZE))))
    }

    /// The fields after the command name, which is in parentheses and may hold spaces or parentheses.
    static func parse(stat: String, bootTime: Double, ticksPerSecond: Double, pageSize: Double) -> Reading? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        // Field 3 (state) is the first after the name.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ n: Int) -> Double? { fields.count > n - 3 ? Double(fields[n - 3]) : nil }
        guard let utime = field(14), let stime = field(15), let start = field(22), let vsize = field(23),
            let rss = field(24),
            ticksPerSecond > 0
        else { return nil }
        return Reading(
            cpuSeconds: (utime + stime) / ticksPerSecond, residentBytes: rss * pageSize, virtualBytes: vsize,
            startTime: bootTime + start / ticksPerSecond)
    }

    private static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("btime ") })
        else { return nil }
        return Double(line.dropFirst("btime ".count).trimmingCharacters(in: .whitespaces))
    }

    private static func openDescriptors() -> Int? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        var n = 0
        while let entry = readdir(dir) {
            if entry.pointee.d_name.0 != UInt8(ascii: ".") { n += 1 }
        }
        return n - 1  // the descriptor of the listing itself
    }
}
