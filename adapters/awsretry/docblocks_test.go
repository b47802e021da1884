package awsretry_test

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/backstop-go/backstop/adapters/awsretry"
)

// The wiring the package documentation shows, compiled with the tests so that it
// cannot drift from the API; it is not run.
var _ = func(cfg aws.Config) *dynamodb.Client {
	r := awsretry.NewStandard("dynamodb") // or awsretry.New(p, awsretry.Options{})
	r.Configure(&cfg)                     // cfg from config.LoadDefaultConfig
	db := dynamodb.NewFromConfig(cfg)
	return db
}
