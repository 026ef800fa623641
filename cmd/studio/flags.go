package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// command is one subcommand's command line: its flags, each with the
// environment variables it falls back to, and its help. Every command
// behaves the same way: -h prints the help on stdout and exits 0, flags go
// before or after the arguments, a flag left off the command line takes its
// variable's value (STUDIO_<NAME> unless said otherwise), and each default
// is said once.
type command struct {
	name     string // "run"
	synopsis string // "studio run SCENARIO.json|lesson:NAME[--VARIANT] [flags]"
	about    string // what it does, a few lines
	args     string // what the positional arguments are, for errors: "a scenario file or lesson:NAME"
	nargs    int    // how many positional arguments it takes
	fs       *flag.FlagSet
	env      map[string][]string // flag name -> variables, the first one set wins
	defaults map[string]string   // flag name -> the default as said in the help
	order    []string
	from     map[string]string // flag name -> where its value came from: "flag" or "$VAR"
	stdout   io.Writer
	stderr   io.Writer
}

func newCommand(name, synopsis, about string, stdout, stderr io.Writer) *command {
	c := &command{name: name, synopsis: synopsis, about: about, fs: flag.NewFlagSet(name, flag.ContinueOnError),
		env: map[string][]string{}, defaults: map[string]string{}, from: map[string]string{}, stdout: stdout, stderr: stderr}
	c.fs.SetOutput(io.Discard) // errors and help are ours to print
	return c
}

// positional says what the command's arguments are: n of them, described
// for the error when they are missing.
func (c *command) positional(n int, what string) *command {
	c.nargs, c.args = n, what
	return c
}

// envName is the variable a flag falls back to: STUDIO_ and its name, upper
// case, dashes as underscores.
func envName(flag string) string {
	return "STUDIO_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// String defines a string flag. def is its default; shown is the default as
// the help says it ("" to say none); env overrides the variables it reads
// (nil: STUDIO_<NAME>; empty, non-nil: none).
func (c *command) String(name, def, shown, usage string, env []string) *string {
	p := c.fs.String(name, def, usage)
	c.add(name, shown, env)
	return p
}

// Duration defines a duration flag (10m, 5s), its default said as given.
func (c *command) Duration(name string, def time.Duration, usage string, env []string) *time.Duration {
	p := c.fs.Duration(name, def, usage)
	c.add(name, def.String(), env)
	return p
}

// Bool defines a boolean flag, false unless given.
func (c *command) Bool(name, usage string, env []string) *bool {
	p := c.fs.Bool(name, false, usage)
	c.add(name, "", env)
	return p
}

func (c *command) add(name, shown string, env []string) {
	if env == nil {
		env = []string{envName(name)}
	}
	c.env[name], c.defaults[name] = env, shown
	c.order = append(c.order, name)
}

// given reports where a flag's value came from: "flag", "$VAR", or "" for
// its default.
func (c *command) given(name string) string { return c.from[name] }

// parse reads the command line: flags before or after the arguments, then
// each flag not given from its variables. It returns the arguments, or an
// exit code when there is nothing to run: 0 after -h, 2 after a problem,
// which it has said.
func (c *command) parse(args []string) ([]string, int, bool) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help(c.stdout)
				return nil, exitOK, false
			}
			return nil, c.fail("%v", err), false
		}
		if c.fs.NArg() == 0 {
			break
		}
		pos = append(pos, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
	c.fs.Visit(func(f *flag.Flag) { c.from[f.Name] = "flag" })
	for _, name := range c.order {
		if c.from[name] != "" {
			continue
		}
		for _, v := range c.env[name] {
			val, ok := os.LookupEnv(v)
			if !ok || val == "" {
				continue
			}
			if err := c.fs.Set(name, val); err != nil {
				return nil, c.fail("$%s: %v", v, err), false
			}
			c.from[name] = "$" + v
			break
		}
	}
	switch {
	case len(pos) < c.nargs:
		return nil, c.fail("give %s", c.args), false
	case len(pos) > c.nargs && c.nargs == 0:
		return nil, c.fail("takes no arguments; got %q", pos[0]), false
	case len(pos) > c.nargs:
		return nil, c.fail("give one %s, not %d (%s)", strings.TrimPrefix(c.args, "a "), len(pos), strings.Join(pos, ", ")), false
	}
	return pos, exitOK, true
}

// fail says what is wrong, then how the command is used; it returns the
// exit code for bad usage.
func (c *command) fail(format string, args ...any) int {
	fmt.Fprintf(c.stderr, "studio %s: %s\n", c.name, fmt.Sprintf(format, args...))
	fmt.Fprintf(c.stderr, "usage: %s\nRun 'studio help %s' for more.\n", c.synopsis, c.name)
	return exitUsage
}

// help prints the whole help: synopsis, what the command does, each flag
// with its default and variables said once.
func (c *command) help(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.synopsis, strings.TrimSpace(c.about))
	if len(c.order) == 0 {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	for _, name := range c.order {
		f := c.fs.Lookup(name)
		arg, usage := flag.UnquoteUsage(f)
		head := "  --" + name
		if arg != "" {
			head += " " + arg
		}
		var notes []string
		if d := c.defaults[name]; d != "" {
			notes = append(notes, "default "+d)
		}
		if env := c.env[name]; len(env) > 0 {
			notes = append(notes, "env "+strings.Join(dollars(env), ", then "))
		}
		if len(notes) > 0 {
			usage += " (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintf(w, "%s\n      %s\n", head, usage)
	}
}

func dollars(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "$" + n
	}
	return out
}
