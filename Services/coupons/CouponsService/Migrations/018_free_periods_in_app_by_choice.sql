-- A free period Redeem grants is redeemed on the web, not inside an iOS app (App Review 3.1.1),
-- unless the operator allows it for the coupon.
ALTER TABLE coupons ADD COLUMN allow_in_app boolean NOT NULL DEFAULT false;
