package testbed

import (
	"fmt"
	"strings"
)

// authorizerConfig is the server.properties lines that turn Kafka's
// StandardAuthorizer on, when s.Authorizer: every principal is denied what
// no ACL allows, but the super users. The PLAINTEXT listener's principal,
// User:ANONYMOUS (the controller, inter-broker traffic and the bed's own
// helpers such as CreateTopic and ConsumeAll), is one, and so are
// s.SuperUsers; a test grants the SASL_SSL users what it wants them to have
// with CreateACLs over the PLAINTEXT listener.
func (s *KafkaSecurity) authorizerConfig() string {
	if !s.Authorizer {
		return ""
	}
	supers := []string{"User:ANONYMOUS"}
	for _, u := range s.SuperUsers {
		supers = append(supers, "User:"+u)
	}
	return fmt.Sprintf(`
# StandardAuthorizer (KafkaSecurity.Authorizer).
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=%s
`, strings.Join(supers, ";"))
}
