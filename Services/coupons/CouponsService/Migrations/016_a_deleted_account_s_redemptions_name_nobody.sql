-- Deleting an account ends its reservations still waiting for a purchase and then takes its
-- id off every one of its redemptions (issue 22 section 4). Only a reservation waiting for
-- its purchase must name its account, which the purchase is attributed to.
ALTER TABLE redemptions DROP CONSTRAINT redemptions_unattributed_completed;
ALTER TABLE redemptions ADD CONSTRAINT redemptions_reservation_attributed CHECK (account_id IS NOT NULL OR status <> 'reserved');
