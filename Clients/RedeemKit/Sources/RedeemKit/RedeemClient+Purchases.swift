import Foundation

// Purchases made while the app was away. The user redeems an offer code on Apple's page, outside
// the app; the app may be suspended or killed before StoreKit tells it. StoreKit keeps the
// transaction until the app finishes it, and hands it over at the next launch. The listener posts
// each offer-code transaction to the account's reservation, and finishes it only once Redeem has
// it, so a purchase is never lost between the App Store and Redeem.

extension RedeemClient {
    /// Starts the purchase listener: call at launch (in `App.init` or
    /// `application(_:didFinishLaunchingWithOptions:)`), before anything else finishes
    /// transactions. It takes every offer-code transaction from the configuration's
    /// `storeTransactions` (StoreKit on Apple platforms; none elsewhere, where it does nothing),
    /// those left unfinished first, and posts each to the signed-in account's reservation of that
    /// plan (`POST /v1/redemptions/{id}/purchase {signedTransaction}`). A posted transaction is
    /// finished; one that found no answer is posted again with backoff (`purchaseRetry`); one the
    /// server refused, or that no reservation waits for, is left unfinished. Other transactions
    /// are not touched. Calling it again while it runs does nothing; `stop()` ends it.
    public func start() {
        guard purchaseListener == nil, let source = configuration.storeTransactions else { return }
        purchaseListener = Task { [weak self] in
            await withTaskGroup(of: Void.self) { group in
                for await transaction in source.transactions() where transaction.offerType == .code {
                    guard let self else { return }
                    // Each on its own, so one that waits out its backoff holds up no other.
                    group.addTask { _ = await self.handle(transaction) }
                }
            }
        }
    }

    /// Stops the purchase listener (a transaction being posted stays unfinished).
    public func stop() {
        purchaseListener?.cancel()
        purchaseListener = nil
    }

    /// What the listener did with each offer-code transaction. Each access makes a new stream; it
    /// ends when its consumer stops iterating.
    public nonisolated var purchaseUpdates: AsyncStream<StorePurchaseOutcome> {
        purchases.stream()
    }

    /// Posts one offer-code transaction, retrying while the failure may pass, and finishes it once
    /// posted. Returns nil when cancelled first.
    func handle(_ transaction: StoreTransaction) async -> StorePurchaseOutcome? {
        var failures = 0
        while !Task.isCancelled {
            let outcome: StorePurchaseOutcome
            do {
                outcome = try await post(transaction)
            } catch let e as RedeemError where PurchaseRetryPolicy.isTransient(e) {
                failures += 1
                let pause = configuration.purchaseRetry.delay(afterFailures: failures)
                do { try await Task.sleep(nanoseconds: UInt64(pause * 1_000_000_000)) } catch { return nil }
                continue
            } catch let e as RedeemError {
                outcome = .refused(transactionId: transaction.id, e)
            } catch {
                return nil
            }
            if case .posted = outcome { await transaction.finish() }
            purchases.yield(outcome)
            return outcome
        }
        return nil
    }

    /// One attempt: find the reservation the transaction is for, and post it there.
    private func post(_ transaction: StoreTransaction) async throws -> StorePurchaseOutcome {
        guard try currentSession() != nil else { return .unmatched(transactionId: transaction.id) }
        // A reservation lives minutes, so any that waits is on the first page, newest first.
        let reserved = try await myRedemptions(limit: 50).data.filter { $0.status == .reserved && $0.platform == .ios }
        guard let redemption = Self.reservation(for: transaction, among: reserved) else {
            return .unmatched(transactionId: transaction.id)
        }
        let posted = try await completeAppStorePurchase(
            redemptionId: redemption.redemptionId,
            signedTransaction: transaction.signedTransaction)
        return .posted(transactionId: transaction.id, posted)
    }

    /// The reservation a transaction pays for: the newest of the plan bought (or of no plan named),
    /// and not one whose `appAccountToken` says the purchase was another account's.
    static func reservation(for transaction: StoreTransaction, among reserved: [Redemption]) -> Redemption? {
        reserved
            .filter { $0.productId == nil || $0.productId == transaction.productId }
            .filter { r in
                guard let bought = transaction.appAccountToken, let ours = r.appStore?.appAccountToken else {
                    return true
                }
                return bought == ours
            }
            .max { $0.reservedAt < $1.reservedAt }
    }
}
