internal import CMicroHTTPD
import Core
import Dispatch
import Foundation
import Glibc
import Synchronization

/// One of an `HTTPServer`'s threads: it runs a libmicrohttpd daemon of its own (which has no
/// thread of its own), and it is the preferred executor of the handler tasks that daemon starts.
/// A request is read, handled and answered on this thread, and leaves it only while its handler
/// waits for another (a bus reply), whose answer brings it back here.
///
/// This replaced libmicrohttpd's own thread pool, where every request went from a libmicrohttpd
/// thread to the Swift executor's and back (a wake-up each way, and a `write` to the daemon's
/// wake-up descriptor for every answer): the gateway spent about a fifth less CPU per validation
/// (docs/performance.md, "Session 36").
final class HTTPLoop: TaskExecutor, @unchecked Sendable {
    let daemon: OpaquePointer
    private let epoll: Int32
    /// Written when a job arrives from another thread while the queue was empty (an eventfd).
    private let wake: Int32
    /// Jobs to run, and whether the loop still runs them (once closed, they go to the global queue).
    private let state = Mutex<(jobs: [UnownedJob], open: Bool)>(([], true))
    private let ended = DispatchSemaphore(value: 0)
    private let started = Atomic<Bool>(false)

    private static let currentKey: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The loop whose thread this is, if any.
    static var current: HTTPLoop? {
        pthread_getspecific(currentKey).map { Unmanaged<HTTPLoop>.fromOpaque($0).takeUnretainedValue() }
    }

    struct NoDescriptors: Error {}

    init(daemon: OpaquePointer) throws {
        self.daemon = daemon
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        wake = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        guard epoll >= 0, wake >= 0 else {
            if epoll >= 0 { Glibc.close(epoll) }
            if wake >= 0 { Glibc.close(wake) }
            throw NoDescriptors()
        }
        for fd in [wake, cmicrohttpd_epoll_fd(daemon)] {
            var e = epoll_event()
            e.events = EPOLLIN.rawValue
            e.data.fd = fd
            _ = epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &e)
        }
    }

    deinit {
        Glibc.close(epoll)
        Glibc.close(wake)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let (open, first) = state.withLock { s in
            if s.open { s.jobs.append(job) }
            return (s.open, s.jobs.count == 1)
        }
        guard open else { return forward(job) }
        // The loop looks at its queue before it sleeps: only another thread must wake it.
        if first, Self.current !== self { signal() }
    }

    /// The tasks its requests' handlers run in, each kept for the next request once it has
    /// answered (`HandlerTasks`), at most a busy loop's share of a gateway's connections.
    let handlers = HandlerTasks(limit: HTTPLoop.idleHandlerLimit)
    static let idleHandlerLimit = 64

    /// Runs a request's handler, up to its answer, in one of `handlers`, on this loop.
    func handle(_ handling: @escaping HandlerTasks.Handling) { handlers.run(handling, preferring: self) }

    /// Runs `body` on this loop's thread (libmicrohttpd's calls on a daemon run on its thread).
    func perform(_ body: @escaping @Sendable () -> Void) async {
        await Task(executorPreference: self) { body() }.value
    }

    func start(name: String) {
        let thread = Thread { [self] in
            pthread_setspecific(Self.currentKey, Unmanaged.passUnretained(self).toOpaque())
            cmicrohttpd_name_thread(name)
            run()
            ended.signal()
        }
        started.store(true, ordering: .releasing)
        thread.start()
    }

    /// Ends the thread; jobs that arrive later (a handler still waiting when the server stopped)
    /// run on the global queue.
    func close() {
        handlers.close()  // the tasks waiting end on the global queue
        let left = state.withLock { s in
            s.open = false
            defer { s.jobs = [] }
            return s.jobs
        }
        signal()
        // Not on its own thread (that would wait for itself), nor for a thread never started.
        if started.load(ordering: .acquiring), Self.current !== self { ended.wait() }
        for job in left { forward(job) }
    }

    private func forward(_ job: UnownedJob) {
        let executor = asUnownedTaskExecutor()
        DispatchQueue.global().async { job.runSynchronously(on: executor) }
    }

    /// Wakes the loop so that it runs its daemon again: after a connection was resumed from
    /// another thread. libmicrohttpd empties its own wake-up descriptor inside `MHD_run`, so a
    /// resume that lands while the loop is in there would otherwise wait for the loop's timeout.
    func nudge() { signal() }

    private func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(wake, &one, 8)
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 4)
        let executor = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        while true {
            let open = state.withLock { s in
                swap(&batch, &s.jobs)
                return s.open
            }
            guard open else { return }
            for job in batch { job.runSynchronously(on: executor) }
            batch.removeAll(keepingCapacity: true)
            // A job may have ended this loop, and stopped its daemon (a server stopped from a handler).
            guard state.withLock({ $0.open }) else { return }
            _ = MHD_run(daemon)
            if !state.withLock({ $0.jobs.isEmpty }) { continue }
            let n = epoll_wait(epoll, &events, Int32(events.count), cmicrohttpd_timeout_ms(daemon, 1000))
            for i in 0..<max(0, Int(n)) where events[i].data.fd == wake {
                var value: UInt64 = 0
                _ = Glibc.read(wake, &value, 8)
            }
        }
    }
}
