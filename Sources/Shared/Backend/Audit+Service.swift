import Bus
import Core
import Database
import Foundation

extension BackendService {
    /// Records an operator change in the service's own `<schema>.audit_log`, in the change's
    /// transaction, so the change and its record commit or roll back together. `app` nil: the
    /// default app (`DefaultApp.of`).
    public static func audit(
        _ tx: PGConnection, _ actor: AuditActor?, _ action: AuditAction, _ objectId: String, before: (any Encodable)?,
        after: (any Encodable)?, _ context: BusContext, _ mode: Mode, app: UUID? = nil
    ) throws {
        try AuditTable.write(
            tx, schema: migrator.schema,
            AuditChange(
                actor: actor, action: action, objectId: objectId, before: before,
                after: after, requestId: context.requestId,
                mode: mode,
                app: DefaultApp.of(app)))
    }
}
