package main

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/plugins/pii/detect"
	"github.com/tollgate/tollgate/sdk/jsonscan"
)

// mode is what the plugin does with personal data in a request.
type mode uint8

const (
	// modeRedact replaces each finding with a placeholder; the upstream
	// and the client see placeholders.
	modeRedact mode = iota
	// modeMask replaces findings with placeholders and puts the originals
	// back into the reply.
	modeMask
	// modeReject refuses the request, naming the kinds found.
	modeReject
)

var modeNames = [...]string{modeRedact: "redact", modeMask: "mask-and-restore", modeReject: "reject"}

// replyMode is what the plugin does with the reply.
type replyMode uint8

const (
	replyOff     replyMode = iota // the reply goes as the upstream wrote it
	replyRedact                   // personal data in the reply is replaced by placeholders
	replyRestore                  // placeholders of the request are replaced by their originals
)

// policy is a parsed, checked configuration. It is the same for every
// request and never changes after on_configure.
type policy struct {
	mode        mode
	reply       replyMode
	scanner     *detect.Scanner
	placeholder template
	roles       []string
	status      int
	message     string
}

const (
	defaultPlaceholder = "[{KIND}_{N}]"
	defaultMessage     = "The request contains personal data or secrets ({kinds}); remove them and try again."
	defaultStatus      = 400
	maxMessage         = 4096 // the host's limit on an error message
	maxPlaceholder     = 64
)

// defaultRoles are the roles scanned when the config names none: what
// users and tools write, and the assistant's earlier turns, which a client
// sends back with the originals the plugin restored in them.
var defaultRoles = []string{"user", "assistant", "tool"}

const configKeys = "(keys: mode, detectors, private_ips, placeholder, reply, roles, reject_status, reject_message)"

// configReader is the state of one parseConfig.
type configReader struct {
	p                  *policy
	s                  jsonscan.Scanner
	opts               detect.Options
	reply, placeholder string
}

// parseConfig reads and checks the plugin's config. Errors name the bad
// entry, as the operator sees them when the plugin fails to load.
func parseConfig(raw []byte) (*policy, error) {
	c := &configReader{p: &policy{mode: modeRedact, status: defaultStatus, message: defaultMessage}, placeholder: defaultPlaceholder}
	p := c.p
	c.s.Reset(raw)
	if c.s.Peek() != '{' {
		return nil, errors.New("the config must be a JSON object " + configKeys)
	}
	err := c.s.Object(c.member)
	if err == nil {
		err = c.s.End()
	}
	if err != nil {
		return nil, err
	}
	if p.placeholder, err = parseTemplate(c.placeholder); err != nil {
		return nil, err
	}
	if p.reply, err = parseReply(c.reply, p.mode); err != nil {
		return nil, err
	}
	if p.roles == nil {
		p.roles = defaultRoles
	}
	p.scanner = detect.New(c.opts)
	return p, nil
}

// member reads one key of the config object.
func (c *configReader) member(key []byte) error {
	s, p := &c.s, c.p
	switch k := string(key); k {
	case "mode":
		v, err := str(s, k)
		if err != nil {
			return err
		}
		for m, name := range modeNames {
			if v == name {
				p.mode = mode(m)
				return nil
			}
		}
		return errors.New(`"mode" is ` + strconv.Quote(v) + `; it must be "reject", "redact" or "mask-and-restore"`)
	case "detectors":
		return parseDetectors(s, &c.opts)
	case "private_ips":
		return boolean(s, k, &c.opts.PrivateIPs)
	case "placeholder":
		v, err := str(s, k)
		c.placeholder = v
		return err
	case "reply":
		v, err := str(s, k)
		c.reply = v
		return err
	case "roles":
		return parseRoles(s, p)
	case "reject_status":
		b, err := s.Number()
		if err != nil {
			return errors.New(`"reject_status" must be a number from 400 to 599`)
		}
		n, err := strconv.Atoi(string(b))
		if err != nil || n < 400 || n > 599 {
			return errors.New(`"reject_status" is ` + string(b) + `; it must be from 400 to 599`)
		}
		p.status = n
		return nil
	case "reject_message":
		v, err := str(s, k)
		if err == nil && (v == "" || len(v) > maxMessage) {
			err = errors.New(`"reject_message" must be 1 to 4096 bytes long`)
		}
		p.message = v
		return err
	}
	return errors.New("unknown key " + strconv.Quote(string(key)) + " " + configKeys)
}

func str(s *jsonscan.Scanner, key string) (string, error) {
	if s.Peek() != '"' {
		return "", errors.New(strconv.Quote(key) + " must be a string")
	}
	b, err := s.Str()
	return string(b), err
}

func boolean(s *jsonscan.Scanner, key string, v *bool) error {
	switch s.Peek() {
	case 't':
		*v = true
		return s.Literal("true")
	case 'f':
		*v = false
		return s.Literal("false")
	}
	return errors.New(strconv.Quote(key) + " must be true or false")
}

func parseDetectors(s *jsonscan.Scanner, o *detect.Options) error {
	if s.Peek() != '[' {
		return errors.New(`"detectors" must be a list of names: ` + detect.Names)
	}
	o.Kinds = 0
	err := s.Array(func(i int) error {
		name, err := str(s, "detectors["+strconv.Itoa(i)+"]")
		if err != nil {
			return err
		}
		set, ok := detect.ParseSet(name)
		if !ok {
			return errors.New("detectors[" + strconv.Itoa(i) + "] is " + strconv.Quote(name) + "; detectors are " + detect.Names)
		}
		o.Kinds |= set
		return nil
	})
	if err == nil && o.Kinds == 0 {
		err = errors.New(`"detectors" is empty; leave it out to use every detector`)
	}
	return err
}

func parseRoles(s *jsonscan.Scanner, p *policy) error {
	if s.Peek() != '[' {
		return errors.New(`"roles" must be a list of message roles, such as ["user", "tool"]`)
	}
	p.roles = []string{}
	err := s.Array(func(i int) error {
		role, err := str(s, "roles["+strconv.Itoa(i)+"]")
		if err == nil && role == "" {
			err = errors.New("roles[" + strconv.Itoa(i) + "] is empty")
		}
		p.roles = append(p.roles, role)
		return err
	})
	if err == nil && len(p.roles) == 0 {
		err = errors.New(`"roles" is empty: nothing would be scanned`)
	}
	return err
}

// parseReply checks the reply mode against the request mode.
func parseReply(v string, m mode) (replyMode, error) {
	switch v {
	case "":
		if m == modeMask {
			return replyRestore, nil
		}
		return replyOff, nil
	case "off":
		return replyOff, nil
	case "redact":
		if m == modeMask {
			return 0, errors.New(`"reply" is "redact" with mode "mask-and-restore", which would redact the originals it restores; use "restore" (the default) or "off"`)
		}
		return replyRedact, nil
	case "restore":
		if m != modeMask {
			return 0, errors.New(`"reply" is "restore", which needs mode "mask-and-restore" (only masked requests have originals to restore)`)
		}
		return replyRestore, nil
	}
	return 0, errors.New(`"reply" is ` + strconv.Quote(v) + `; it must be "off", "redact" or "restore"`)
}

// scansRole reports whether parts of messages with this role are scanned.
func (p *policy) scansRole(role []byte) bool {
	for _, r := range p.roles {
		if string(role) == r {
			return true
		}
	}
	return false
}

// rejectMessage is the error message for a request with these kinds: the
// configured message with {kinds} replaced by their names, never values.
func (p *policy) rejectMessage(kinds detect.Set) string {
	names := make([]string, 0, 4)
	for _, k := range kinds.Kinds() {
		names = append(names, k.String())
	}
	return strings.ReplaceAll(p.message, "{kinds}", strings.Join(names, ", "))
}
