(function(){
  var arts=[].slice.call(document.querySelectorAll('article.q'));
  var search=document.getElementById('search'), run=document.getElementById('run');
  var count=document.getElementById('count');
  var text=arts.map(function(a){return a.textContent.toLowerCase();});
  function status(){var c=document.querySelector('input[name=status]:checked');return c?c.value:'all';}
  function apply(push){
    var s=status(), r=run.value, q=search.value.trim().toLowerCase(), shown=0;
    arts.forEach(function(a,i){
      var ok=(s==='all'||a.dataset.status===s)&&(r==='all'||a.dataset.run===r||a.dataset.system===r)
        &&(!q||text[i].indexOf(q)>=0);
      a.classList.toggle('hidden',!ok); if(ok) shown++;
    });
    document.querySelectorAll('section.runsec').forEach(function(sec){
      sec.classList.toggle('hidden',!sec.querySelector('article.q:not(.hidden)'));
    });
    count.textContent='showing '+shown+' of '+arts.length+' questions';
    if(push){
      var p=new URLSearchParams();
      if(s!=='all')p.set('status',s); if(r!=='all')p.set('run',r); if(q)p.set('q',search.value.trim());
      var qs=p.toString(); history.replaceState(null,'',(qs?'?'+qs:location.pathname.split('/').pop())+location.hash);
    }
  }
  var p=new URLSearchParams(location.search);
  var wanted=p.get('status');  /* compared, never put into a selector: ?status=" must not throw */
  document.querySelectorAll('input[name=status]').forEach(function(el){if(el.value===wanted)el.checked=true;});
  if(p.get('run')&&[].some.call(run.options,function(o){return o.value===p.get('run');}))run.value=p.get('run');
  if(p.get('q'))search.value=p.get('q');
  var expand=p.get('expand')==='1';
  document.querySelectorAll('input[name=status]').forEach(function(el){el.addEventListener('change',function(){apply(true);});});
  run.addEventListener('change',function(){apply(true);});
  search.addEventListener('input',function(){apply(true);});
  document.getElementById('expand').addEventListener('click',function(){
    arts.forEach(function(a){if(!a.classList.contains('hidden'))a.querySelector('details').open=true;});});
  document.getElementById('collapse').addEventListener('click',function(){
    arts.forEach(function(a){a.querySelector('details').open=false;});});
  function openHash(){
    if(!location.hash)return; var id=location.hash.slice(1);
    try{id=decodeURIComponent(id);}catch(e){}  /* a malformed escape (#%E0%A4%A) is looked up as written */
    var a=document.getElementById(id);
    if(a&&a.tagName==='ARTICLE'){
      var sec=a.closest('section.runsec'); if(sec)sec.classList.remove('hidden');  /* a filter may hide its run */
      a.classList.remove('hidden');a.querySelector('details').open=true;a.scrollIntoView();
      /* the bar wraps on narrow windows: scroll the question out from under it, whatever its height */
      var bar=document.querySelector('.toolbar').getBoundingClientRect().bottom;
      if(a.getBoundingClientRect().top<bar+8)window.scrollBy(0,a.getBoundingClientRect().top-bar-8);
      /* where it landed, for checks: the question's top, the sticky bar's bottom, whether the page ends here */
      var top=a.getBoundingClientRect().top;
      var end=window.scrollY+window.innerHeight>=document.documentElement.scrollHeight-1;
      document.body.setAttribute('data-anchor',Math.round(top)+' '+Math.round(bar)+' '+(end?'end':'mid'));
    }
  }
  window.addEventListener('hashchange',openHash);
  apply(false);
  if(expand)arts.forEach(function(a){if(!a.classList.contains('hidden'))a.querySelector('details').open=true;});
  openHash();
  document.body.setAttribute('data-ready',count.textContent);
})();
