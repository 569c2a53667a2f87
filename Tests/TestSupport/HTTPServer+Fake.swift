import HTTP
import Telemetry

extension HTTPServer {
    /// A server for a fake of an outside system: loopback, any free port, two threads, no logs.
    /// Not started, so the fake can finish setting itself up first.
    static func fake(_ service: String, handler: @escaping Handler) -> HTTPServer {
        var options = HTTPServer.Options()
        options.port = 0
        options.threads = 2
        return HTTPServer(options: options, logger: Logger(service: service, sink: LogSink(capturing: ())), accessLog: false, handler: handler)
    }
}
