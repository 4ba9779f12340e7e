package main

import "go.temporal.io/server/common/config"

// jwtAuthorization switches on Temporal's own authorization: the default JWT claim
// mapper turns a token's permissions claim ("team-a:write", "temporal-system:admin")
// into roles, checking its signature against the keys at the JWKS URL, and the
// default authorizer allows a call only when those roles cover its namespace and API.
func jwtAuthorization(o options) config.Authorization {
	return config.Authorization{
		JWTKeyProvider: config.JWTKeyProvider{
			KeySourceURIs:   []string{o.jwksURL},
			RefreshInterval: o.jwksRefresh,
		},
		PermissionsClaimName: o.permissionsClaim,
		Audience:             o.audience,
		Authorizer:           "default",
		ClaimMapper:          "default",
	}
}
