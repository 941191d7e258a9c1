package gen

import "strings"

// goName turns a spec name such as "routing-key", "get-ok" or "message-id" into an exported Go
// identifier: RoutingKey, GetOk, MessageID.
func goName(specName string) string {
	if n, ok := wordNames[specName]; ok {
		return n
	}
	var b strings.Builder
	for _, word := range strings.Split(specName, "-") {
		if n, ok := wordNames[word]; ok {
			b.WriteString(n)
			continue
		}
		b.WriteString(strings.ToUpper(word[:1]))
		b.WriteString(word[1:])
	}
	return b.String()
}

// wordNames are the words that plain title-casing gets wrong: Go initialisms, and "nowait",
// which the spec spells as one word where every other flag has a hyphen (no-local, no-ack).
var wordNames = map[string]string{
	"id":     "ID",
	"nowait": "NoWait",
}

// argumentGoName names a method argument's struct field, with a comment when the name is not
// the spec's.
func argumentGoName(specName string) (name, comment string) {
	if r, ok := renamedArguments[specName]; ok {
		return r.goName, r.comment
	}
	return goName(specName), ""
}

// renamedArguments are the arguments whose natural Go name is taken by a method of the Method
// interface: connection.close and channel.close carry the class and method that failed, while
// ClassID() and MethodID() are the close method's own ids.
var renamedArguments = map[string]struct{ goName, comment string }{
	"class-id":  {"FailingClassID", "class-id: the class of the method that caused the close, 0 if none"},
	"method-id": {"FailingMethodID", "method-id: the method that caused the close, 0 if none"},
}

// methodSetNames are the exported methods every generated struct has; a field may not share a
// name with them.
var methodSetNames = map[string]bool{
	"ClassID": true, "MethodID": true, "Name": true, "Synchronous": true,
	"HasContent": true, "AppendArgs": true,
}

// isReserved reports whether AMQP 0-9-1 reserves an argument. The 0-9-1 XML calls these
// reserved-N; RabbitMQ's JSON keeps their 0-8 names (ticket, insist, known-hosts, ...). They get
// no struct field: they are written as zero and read past.
func isReserved(class, method, argument string) bool {
	if strings.HasPrefix(argument, "reserved-") {
		return true
	}
	// Access tickets went away with the access class; every other class still has the slot.
	if argument == "ticket" && class != "access" {
		return true
	}
	return reservedArguments[class+"."+method+"."+argument]
}

var reservedArguments = map[string]bool{
	"connection.open.capabilities":   true,
	"connection.open.insist":         true,
	"connection.open-ok.known-hosts": true,
	"channel.open.out-of-band":       true,
	"channel.open-ok.channel-id":     true,
	"basic.get-empty.cluster-id":     true,
}
