import Foundation

extension HTTPClient {
    /// One MCP `tools/call` of tool `name` at `/mcp` (the 2025-11-25 revision, which needs no
    /// handshake headers) with `token` as its bearer credential.
    public func mcpToolCall(
        _ name: String, _ arguments: [String: Any], token: String, id: Int = 1
    ) async throws
        -> Response
    {
        let body: [String: Any] = [
            "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": ["name": name, "arguments": arguments]
        ]
        return try await send(
            "POST", "/mcp", body: try JSONSerialization.data(withJSONObject: body),
            headers: [
                "Authorization": "Bearer \(token)", "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"
            ])
    }
}
