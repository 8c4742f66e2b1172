package suite

import (
	"encoding/xml"
	"fmt"
	"time"
)

// The JUnit XML elements CI systems read (the layout of Ant's JUnit task,
// which Jenkins, GitLab, GitHub's test-report actions and go-junit-report
// share): testsuites > testsuite > testcase, each case with its failures.
type (
	junitSuites struct {
		XMLName  xml.Name     `xml:"testsuites"`
		Name     string       `xml:"name,attr"`
		Tests    int          `xml:"tests,attr"`
		Failures int          `xml:"failures,attr"`
		Errors   int          `xml:"errors,attr"`
		Time     string       `xml:"time,attr"`
		Suites   []junitSuite `xml:"testsuite"`
	}
	junitSuite struct {
		Name       string          `xml:"name,attr"`
		Tests      int             `xml:"tests,attr"`
		Failures   int             `xml:"failures,attr"`
		Errors     int             `xml:"errors,attr"`
		Skipped    int             `xml:"skipped,attr"`
		Time       string          `xml:"time,attr"`
		Properties []junitProperty `xml:"properties>property,omitempty"`
		Cases      []junitCase     `xml:"testcase"`
	}
	junitProperty struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	}
	junitCase struct {
		Name       string          `xml:"name,attr"`
		Classname  string          `xml:"classname,attr"`
		File       string          `xml:"file,attr,omitempty"`
		Time       string          `xml:"time,attr"`
		Properties []junitProperty `xml:"properties>property,omitempty"`
		Failures   []junitProblem  `xml:"failure"`
		Error      *junitProblem   `xml:"error"`
	}
	junitProblem struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Text    string `xml:",chardata"`
	}
)

// JUnit is the report as JUnit XML: one testsuite for the command, one
// testcase per scenario (named by the scenario, its class the proxy mode,
// its file the scenario file), one failure per expectation that did not
// hold, its message starting with file:line:column, and an error for a
// scenario that could not run. Times are the replays' real durations; each
// case's virtual length is its virtualTime property.
func (r *Report) JUnit() []byte {
	suite := junitSuite{
		Name:       "proxysim replay --dataplane " + r.Dataplane,
		Tests:      len(r.Scenarios),
		Failures:   r.Failed, // cases that failed; each has a failure per expectation
		Errors:     r.Errors,
		Properties: []junitProperty{{"dataplane", r.Dataplane}},
	}
	var total time.Duration
	for _, s := range r.Scenarios {
		total += s.Wall
		c := junitCase{
			Name: s.Name, Classname: "proxysim." + s.Mode, File: s.File, Time: seconds(s.Wall),
			Properties: []junitProperty{{"virtualTime", s.VirtualTime}, {"syncs", fmt.Sprint(s.Syncs)}},
		}
		if s.Env != "" {
			c.Properties = append(c.Properties, junitProperty{"env", s.Env})
		}
		for _, f := range s.Failures {
			c.Failures = append(c.Failures, junitProblem{Message: f.Message, Type: "expectation", Text: f.Message + "\n" + f.Detail})
		}
		if s.Error != "" {
			c.Error = &junitProblem{Message: s.Error, Type: "could not run", Text: s.Error}
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Time = seconds(total)
	doc := junitSuites{Name: "proxysim", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Time: suite.Time, Suites: []junitSuite{suite}}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // strings and numbers only: cannot fail
	}
	return append(append([]byte(xml.Header), b...), '\n')
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
