-- Apple takes a custom code once per app, so each App Store plan of a coupon gets its own
-- (`AppStoreCodes`: the first plan by product id the coupon's code, the others `-2`, `-3`, …).
-- Offers made before kept the coupon's code, which is what Apple has for them.
ALTER TABLE store_offers ADD COLUMN custom_code text;
UPDATE store_offers o SET custom_code = c.code FROM coupons c WHERE c.id = o.coupon_id AND o.store = 'appStore';
ALTER TABLE store_offers ADD CONSTRAINT store_offers_app_store_code CHECK ((store = 'appStore') = (custom_code IS NOT NULL));
