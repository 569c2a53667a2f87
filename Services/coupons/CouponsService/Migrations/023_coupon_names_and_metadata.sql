-- An operator's name for a coupon and its own key-value pairs, within Stripe's limits
-- (`CouponRules.checkName`, `checkMetadata`): a name of 1 to 40 characters, metadata an object of
-- strings.
ALTER TABLE coupons ADD COLUMN name text CHECK (char_length(name) BETWEEN 1 AND 40);
ALTER TABLE coupons ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(metadata) = 'object');
